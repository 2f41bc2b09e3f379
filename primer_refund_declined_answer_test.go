package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// primerPaymentRefund is Primer's refund, POST /payments/{id}/refund
// (primer.io/docs/api-reference/v2.4/api-reference/payments-api/refund-a-payment),
// answered 200 with the Payment refunded, not with a refund: "Once
// refunded, the payment will continue to have status = SETTLED ... the
// processor refund transaction will be part of the transactions list"
// (primer.io/docs/manage-payments/refund-payment), and how the refund
// ended is "the transaction with the most recent transactionType:
// REFUND": processorStatus SETTLED made, FAILED not
// (primer.io/docs/api-reference/endpoints/v2.4/payment-webhooks/payment-refund).
// The earlier transactions are the payment's own sale and earlier refunds.
type primerPaymentRefund struct {
	earlier []string // the payment's transactions before this refund
	outcome string   // the processor's status of the refund asked for

	mu    sync.Mutex
	keys  []string
	asked int
}

func (s *primerPaymentRefund) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("X-Idempotency-Key"))
	s.asked++
	s.mu.Unlock()
	txns := ""
	for _, t := range append(append([]string{}, s.earlier...), `{"type":"REFUND","processorStatus":"`+s.outcome+`","processorName":"STRIPE","processorTransactionId":"re_3Kx"}`) {
		txns += "," + t
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"kHdEw9EG","date":"2026-11-29T12:00:00.000000","status":"SETTLED","orderId":"order-abc",`+
		`"currencyCode":"EUR","amount":4200,"processor":{"name":"STRIPE","processorMerchantId":"acct_stripe_1234","amountCaptured":4200,"amountRefunded":0},`+
		`"transactions":[{"type":"SALE","processorStatus":"SETTLED","processorName":"STRIPE","processorTransactionId":"pi_3Kw"}`+txns+`]}`)
}

// The payment's SETTLED is not the refund's outcome: read as the
// resource made, a refund its processor declined settled succeeded with
// the payment's id, and the customer was never refunded. A refund whose
// transaction, the last, says it was declined stays unknown, asked again
// under its key (never failed: the refusal may be an earlier request's,
// action_transaction_not_ours_test.go); one made, or still pending, is
// read as before, and a declined earlier refund of the same payment says
// nothing of this one.
func TestPrimerRefundAnsweredWithThePaymentReadsTheRefundsTransaction(t *testing.T) {
	declinedBefore := `{"type":"REFUND","processorStatus":"FAILED","processorName":"STRIPE","processorTransactionId":"re_3Kv"}`
	for _, tt := range []struct {
		name    string
		earlier []string
		outcome string
		want    idem.State
	}{
		{"refund failed", nil, "FAILED", idem.StateUnknown},
		{"refund declined", nil, "DECLINED", idem.StateUnknown},
		{"refund settled", nil, "SETTLED", idem.StateSucceeded},
		{"refund pending", nil, "PENDING", idem.StateSucceeded},
		{"refund settled after one failed", []string{declinedBefore}, "SETTLED", idem.StateSucceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &primerPaymentRefund{earlier: tt.earlier, outcome: tt.outcome}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: "rf-k", URL: srv.URL + "/payments/kHdEw9EG/refund",
				Body: []byte(`{"amount":4200,"reason":"item returned"}`)})
			require.Equal(t, tt.want, res.State)
			op, lerr := c.Lookup(t.Context(), "", "rf-k")
			require.NoError(t, lerr)
			require.Equal(t, tt.want, op.State, "journaled")
			if tt.want == idem.StateUnknown {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.Empty(t, res.ResourceID, "the payment is not the refund")
				s.mu.Lock()
				defer s.mu.Unlock()
				require.Greater(t, s.asked, 1, "asked again")
				for i, k := range s.keys {
					require.Equal(t, "rf-k", k, "X-Idempotency-Key of request %d", i+1)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, "kHdEw9EG", res.ResourceID)
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Zero(t, sum.Succeeded+sum.Failed, "nothing left open: %+v", sum)
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 1, s.asked, "refunds asked for")
			require.Equal(t, []string{"rf-k"}, s.keys, "X-Idempotency-Key of each request")
		})
	}
}

// A resource answered with its parent, or updated at its own path, whose
// own status is the outcome: Stripe answers a capture, POST
// /v1/payment_intents/{id}/capture, with the PaymentIntent
// (docs.stripe.com/api/payment_intents/capture), its charges' list no
// transactions of an action's own; SumUp answers a checkout processed at
// its own path, PUT /v0.1/checkouts/{id}, with the checkout, PAID, and
// its transactions (developer.sumup.com/api/checkouts/process; an attempt
// declined before the one that paid, listed after it, is modelled).
// Read failed, a capture made, or a checkout paid, would be made again.
func TestActionAnsweredWithTheParentWhoseStatusIsTheOutcome(t *testing.T) {
	for _, tt := range []struct {
		name, path, body, id string
	}{
		{"stripe capture", "/v1/payment_intents/pi_3MtwBw/capture", `{"id":"pi_3MtwBw","object":"payment_intent","amount":2000,` +
			`"amount_received":2000,"status":"succeeded","latest_charge":"ch_3MtwBw",` +
			`"charges":{"object":"list","data":[{"id":"ch_3MtwBw","status":"failed"},{"id":"ch_3MtwBx","status":"succeeded"}]}}`, "pi_3MtwBw"},
		{"sumup checkout", "/v0.1/checkouts/4e425463-3e1b-431d-83fa-1e51c2925e99", `{"id":"4e425463-3e1b-431d-83fa-1e51c2925e99",` +
			`"checkout_reference":"ord-7","amount":10.1,"currency":"EUR","status":"PAID","transactions":[` +
			`{"id":"410fc44a-5956-44e1-b5cc-19c6f8d727a4","status":"SUCCESSFUL"},{"id":"410fc44a-5956-44e1-b5cc-19c6f8d727a3","status":"FAILED"}]}`,
			"4e425463-3e1b-431d-83fa-1e51c2925e99"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusOK, body: tt.body})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			res, err := c.Submit(t.Context(), idem.Request{Key: "act-k", URL: v.srv.URL + tt.path, Body: []byte(`{"amount":2000}`)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, tt.id, res.ResourceID)
			v.requireKeys(t, "Idempotency-Key", "act-k", 1)
		})
	}
}
