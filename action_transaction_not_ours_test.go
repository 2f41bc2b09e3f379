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

// primerPayment is Primer's Payment as its refund, POST
// /payments/{id}/refund, answers it: SETTLED whatever became of the
// refund, its transactions in the schema's own names ("transactionType",
// "amount" in minor units, "processorStatus";
// primer.io/docs/api/api-reference/payments-api/refund-payment). A
// payment may be refunded in parts, by several requests at once, and the
// answer to one lists the others' refunds too, the one the processor
// answered last at the end whichever request asked for it.
func primerPayment(refunds ...string) string {
	txns := `{"transactionType":"SALE","amount":4200,"processorStatus":"SETTLED"}`
	for _, r := range refunds {
		txns += "," + r
	}
	return `{"id":"kHdEw9EG","status":"SETTLED","orderId":"order-abc","currencyCode":"EUR","amount":4200,` +
		`"transactions":[` + txns + `]}`
}

// primerRefund is a refund transaction of amount (minor units) the
// processor ended with status.
func primerRefund(amount, status string) string {
	return `{"transactionType":"REFUND","amount":` + amount + `,"currencyCode":"EUR","processorStatus":"` + status + `"}`
}

// A failed refund is refunded again by its caller, so no refusal listed
// settles ours failed. Another request's refund of another amount,
// declined after ours was made, is not ours: read failed, the customer
// was refunded twice. One of our amount may be an earlier request's, ours
// not listed yet (a refund declined under one key and asked again under
// another was answered with the first one's FAILED, and read failed, the
// second refund made and asked a third time): unknown, asked again under
// its key, never failed.
func TestRefundAnsweredWithThePaymentFailsOnlyOnItsOwnRefusal(t *testing.T) {
	for _, tt := range []struct {
		name    string
		refunds []string
		want    idem.State
	}{
		{"another amount declined after ours made", []string{primerRefund("1000", "SETTLED"), primerRefund("500", "FAILED")}, idem.StateSucceeded},
		{"our amount declined after ours made", []string{primerRefund("1000", "SETTLED"), primerRefund("1000", "FAILED")}, idem.StateUnknown},
		{"our amount declined after one of it pending", []string{primerRefund("1000", "PENDING"), primerRefund("1000", "DECLINED")}, idem.StateUnknown},
		{"our amount declined after one of it saying nothing", []string{`{"transactionType":"REFUND","amount":1000}`, primerRefund("1000", "FAILED")}, idem.StateUnknown},
		{"our amount declined after another amount made", []string{primerRefund("500", "SETTLED"), primerRefund("1000", "FAILED")}, idem.StateUnknown},
		{"our amount declined twice", []string{primerRefund("1000", "FAILED"), primerRefund("1000", "FAILED")}, idem.StateUnknown},
		{"an earlier request's refusal of our amount, ours not listed", []string{primerRefund("1000", "FAILED")}, idem.StateUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusOK, body: primerPayment(tt.refunds...)})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: "rf-k", URL: v.srv.URL + "/payments/kHdEw9EG/refund",
				Body: []byte(`{"amount":1000,"reason":"item returned"}`)})
			require.Equal(t, tt.want, res.State, "reason %q", res.Reason)
			require.NotErrorIs(t, err, idem.ErrFailed)
			op, lerr := c.Lookup(t.Context(), "", "rf-k")
			require.NoError(t, lerr)
			require.Equal(t, tt.want, op.State, "journaled")
			posts := 1
			if tt.want == idem.StateUnknown {
				// Asked again under its key, which Primer's
				// X-Idempotency-Key makes one refund, until the budget
				// runs out.
				posts = v.posts()
			}
			v.requireKeys(t, "X-Idempotency-Key", "rf-k", posts)
		})
	}
}

// An action whose answer lists transactions of another kind than its
// own says nothing by them. Recurly marks an invoice paid by other means,
// PUT /invoices/{id}/mark_successful, only one whose collection is
// pending, past due or failed ("Only invoices with the pending,
// processing, past_due or failed states can be marked as paid",
// docs.recurly.com/recurly-subscriptions/v2021-02-25/reference/
// mark_invoice_successful), and answers with the Invoice, now "paid",
// whose "transactions" (type purchase, refund...; status success,
// declined...: recurly-client-go's Invoice and Transaction) end with the
// declined collection that made it past due. Read failed, the caller
// marks or collects an invoice that is paid.
func TestActionAnsweredWithTransactionsOfAnotherKind(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusOK, body: `{"id":"e28zov4fw0v2","object":"invoice","type":"charge",` +
		`"state":"paid","number":"1000","currency":"USD","total":10.0,"paid":10.0,"balance":0.0,` +
		`"transactions":[{"id":"e28zov4fw0v3","object":"transaction","type":"purchase","origin":"recurring",` +
		`"amount":10.0,"status":"declined","status_code":"insufficient_funds"}]}`})
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "inv-k", Method: http.MethodPut,
		URL: v.srv.URL + "/invoices/e28zov4fw0v2/mark_successful", Body: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "e28zov4fw0v2", res.ResourceID)
	v.requireKeys(t, "Idempotency-Key", "inv-k", 1)
}

// A result query of the refund's payment may come before our refund is
// listed in it (the refund's answer lost, a 504, while it still runs):
// the last refund of our amount there may be an earlier request's,
// declined. Read failed, the caller refunds again and ours lands too.
// Nothing but the answer to the refund itself lists ours for sure.
func TestRefundQueryOfThePaymentNeverFailsOnARefusalListed(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	queries := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			keys = append(keys, r.Header.Get("X-Idempotency-Key"))
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		queries++
		_, _ = io.WriteString(w, primerPayment(primerRefund("1000", "FAILED")))
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
	res, err := c.Submit(t.Context(), idem.Request{Key: "rf-k", URL: srv.URL + "/payments/kHdEw9EG/refund",
		ResultURL: srv.URL + "/payments/kHdEw9EG", Body: []byte(`{"amount":1000}`)})
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateFailed, res.State, "an earlier refund's refusal read as ours")
	op, lerr := c.Lookup(t.Context(), "", "rf-k")
	require.NoError(t, lerr)
	require.NotEqual(t, idem.StateFailed, op.State, "journaled")
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, queries, "result queries")
	require.NotEmpty(t, keys, "refunds asked for")
	for i, k := range keys {
		require.Equalf(t, "rf-k", k, "refund %d: X-Idempotency-Key", i+1)
	}
}
