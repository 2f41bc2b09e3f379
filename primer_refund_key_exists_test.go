package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// primerRefunds is Primer's refund endpoint, POST /payments/{id}/refund
// (primer.io/docs/api/api-reference/payments-api/refund-payment), behind
// its idempotency store: a request whose X-Idempotency-Key was already
// processed is ignored and answered 409 IdempotencyKeyAlreadyExists
// (primer.io/docs/api/introduction/idempotency-key), naming the payment
// refunded and that payment's status, the endpoint's own example
// (apis.io/examples/primer/primer-post-payments-id-refund-response-409-idempotencykeyalreadyexists/:
// "paymentId": "gg3r3tsa3", "paymentStatus": "SETTLED"). The payment is
// the one the path names, SETTLED whatever became of the refund. The
// first answer is lost on the way back; whether the processor made the
// refund (refund) is the model's, which the 409 does not tell.
type primerRefunds struct {
	refund bool

	mu       sync.Mutex
	used     map[string]bool
	asked    int // refunds the processor was asked for
	refunded int // of them, made
	keys     []string
}

const primerRefundedPayment = "gg3r3tsa3"

func (s *primerRefunds) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("X-Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, key)
	payment := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/payments/"), "/refund")
	if s.used[key] {
		body, _ := json.Marshal(map[string]any{"error": map[string]string{
			"errorId":       "IdempotencyKeyAlreadyExists",
			"description":   `The idempotency key "` + key + `" already exists for transaction`,
			"diagnosticsId": "1234567898",
			"paymentId":     payment,
			"paymentStatus": "SETTLED",
		}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(body)
		return
	}
	s.used[key] = true
	s.asked++
	if s.refund {
		s.refunded++
	}
	dropConnection(w)
}

// A refund's 409 names the payment refunded, the resource the request
// acted on, and that payment's status: nothing of how the refund ended.
// Read as the resource the key created, the refund settled succeeded
// with the payment's id, declined or not, and a customer never refunded
// was reported refunded. It proves only that the key's request was
// processed: the refund stays open for a person, never failed (it may
// have been made: failed, it is made again), and, the server's final
// word for the key, never resent.
func TestPrimerRefundKeyExistsNamesThePaymentRefunded(t *testing.T) {
	for _, tt := range []struct {
		name     string
		refund   bool
		refunded int
	}{
		{"refund declined", false, 0},
		{"refund made", true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &primerRefunds{refund: tt.refund, used: map[string]bool{}}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, srv, clock, idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			req := idem.Request{Key: "rf-k", URL: srv.URL + "/payments/" + primerRefundedPayment + "/refund",
				Body: []byte(`{"amount":300,"reason":"item returned"}`)}

			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "the 409 does not say whether the refund was made")
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Empty(t, res.ResourceID, "the payment refunded taken for the refund")

			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Zero(t, sum.Succeeded+sum.Failed, "settled from the payment's status: %+v", sum)
			op, err := c.Lookup(t.Context(), "", "rf-k")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, op.State)
			require.True(t, strings.HasPrefix(op.Review, idem.ReviewFinalAnswer), "review: %q", op.Review)
			require.Contains(t, op.Review, primerRefundedPayment, "the person is told what the answer named")
			require.Empty(t, resourceOf(op))

			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 1, s.asked, "refunds the processor was asked for")
			require.Equal(t, tt.refunded, s.refunded, "refunds made")
			require.Equal(t, []string{"rf-k", "rf-k"}, s.keys, "requests and their X-Idempotency-Key: the lost one and the 409's, nothing after the final answer")
		})
	}
}

// To a first attempt, the refund's 409 says some request with the key was
// processed, perhaps a copy of ours a mesh sent: flagged as the key in
// use, as a create's is, and never a refusal that fails the refund.
func TestPrimerRefundKeyExistsToAFirstAttempt(t *testing.T) {
	p := &behindMesh{answer: shape{status: http.StatusConflict, body: `{"error":{"errorId":"IdempotencyKeyAlreadyExists",` +
		`"description":"The idempotency key \"rf-k\" already exists for transaction","diagnosticsId":"1234567898",` +
		`"paymentId":"` + primerRefundedPayment + `","paymentStatus":"SETTLED"}}`}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
	res, err := c.Submit(t.Context(), idem.Request{Key: "rf-k", URL: srv.URL + "/payments/" + primerRefundedPayment + "/refund",
		Body: []byte(`{"amount":300,"reason":"item returned"}`)})
	requireForeignKey(t, res, err)
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, 2, p.copies, "the mesh's copy and ours, nothing resent")
}

// A refund acts on the payment its path names, and Primer's 409 names the
// payment of the key's request: one other than the path's is another
// request's, whose key ours shares (a service sharing the account, or a
// key taken from a business id, which Primer's idempotency page warns
// against: "multiple payment attempts and refunds can be made for a
// single order"). Primer ignored ours, and nothing was refunded. So does
// Moov's 409 to a refund, POST /accounts/{accountID}/transfers/{transferID}/refunds,
// carry the key's transfer ("returns a 409 with the original transfer in
// the body", docs.moov.io/guides/money-movement/manage-transfers): one
// not the path's was made by another request. Taken as the resource our
// key created, the refund settled succeeded with that other payment's id
// after its first answer was lost.
func TestRefundKeyExistsNamingAnotherPayment(t *testing.T) {
	for _, tt := range []struct {
		name, path, body, other string
	}{
		{"primer", "/payments/Pq7rT2vX/refund", `{"error":{"errorId":"IdempotencyKeyAlreadyExists",` +
			`"description":"The idempotency key \"rf-k\" already exists for transaction","diagnosticsId":"1234567898",` +
			`"paymentId":"` + primerRefundedPayment + `","paymentStatus":"SETTLED"}}`, primerRefundedPayment},
		{"moov", "/accounts/cb6ae9f9-afab-4f06-9eb0-8abf54a3ada2/transfers/04022119-95be-4ef4-9dd4-b3782f6aa7b9/refunds",
			`{"transferID":"ec7e1848-dc80-4ab0-8827-dd7fc0737b01","createdOn":"2026-11-29T11:00:00Z","status":"completed",` +
				`"amount":{"currency":"USD","value":300}}`, "ec7e1848-dc80-4ab0-8827-dd7fc0737b01"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
			v := newVendor(t, lost, shape{status: http.StatusConflict, body: tt.body})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: "rf-k", URL: v.srv.URL + tt.path, Body: []byte(`{"amount":300}`)})
			requireForeignKey(t, res, err)

			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Zero(t, sum.Succeeded+sum.Failed, "settled from another payment's status: %+v", sum)
			op, err := c.Lookup(t.Context(), "", "rf-k")
			require.NoError(t, err)
			requireOtherRequestsOp(t, c, op, "rf-k", tt.other)
			v.requireKeys(t, "X-Idempotency-Key", "rf-k", 2)
		})
	}
}
