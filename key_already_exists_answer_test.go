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

// Primer never replays: "If a request with the same idempotency key has
// already been successfully processed by Primer, the new request will be
// ignored. A 409 error will be returned with an errorId set to
// IdempotencyKeyAlreadyExists", and "a payment request resulting in a
// declined or failed payment is still considered successfully processed"
// (https://primer.io/docs/api/introduction/idempotency-key; the 400
// TransactionRequestIdempotencyKeyAlreadyExists of its earlier API
// version). To a create (POST /payments) the answer names the payment the
// key made and its status
// (https://apis.io/examples/primer/primer-post-payments-response-400-idempotencyerror/;
// a refund's names the payment refunded: primer_refund_key_exists_test.go):
// the key's final word, as a replay is, never a request still running.
// Banking Circle's direct debits answer so too, with a 400 whose message
// names the entity the key created (bankingCircleUsed).
func primerKeyExists(status int, paymentStatus string) shape {
	if status == http.StatusBadRequest {
		return shape{status: status, body: `{"error":{"errorId":"TransactionRequestIdempotencyKeyAlreadyExists",` +
			`"description":"Transaction request already exists with idempotency key 'k'.","paymentId":"6gHJtooK6",` +
			`"paymentStatus":"` + paymentStatus + `","diagnosticsId":"1234567898","validationErrors":[]}}`}
	}
	return shape{status: status, body: `{"error":{"errorId":"IdempotencyKeyAlreadyExists",` +
		`"description":"The idempotency key \"k\" already exists for transaction","diagnosticsId":"1234567898",` +
		`"paymentId":"6gHJtooK6","paymentStatus":"` + paymentStatus + `"}}`}
}

// bankingCircleUsed is Banking Circle's answer to a direct debit sent
// again after one with its key was accepted
// (https://docs.bankingcircleconnect.com/v2/docs/idempotency-keys-1).
var bankingCircleUsed = shape{status: http.StatusBadRequest, body: `{"error":{"id":"c2a3b0e4","code":400,` +
	`"message":"IdempotencyKey k was already used at 2026-11-29T12:00:00Z creating entity 6gHJtooK6.","details":[]}}`}

// After an answer lost on the way back, the payment named is ours:
// settled as its status says, once, with nothing resent after it.
func TestKeyAlreadyExistsAfterALostResponse(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	for _, tt := range []struct {
		name   string
		answer shape
		state  idem.State
		kind   error
	}{
		{"primer 409 settled payment", primerKeyExists(http.StatusConflict, "SETTLED"), idem.StateSucceeded, nil},
		{"primer 409 authorized payment", primerKeyExists(http.StatusConflict, "AUTHORIZED"), idem.StateSucceeded, nil},
		{"primer 409 declined payment", primerKeyExists(http.StatusConflict, "DECLINED"), idem.StateFailed, idem.ErrFailed},
		{"primer 400 settled payment", primerKeyExists(http.StatusBadRequest, "SETTLED"), idem.StateSucceeded, nil},
		{"banking circle 400 creating entity", bankingCircleUsed, idem.StateSucceeded, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, lost, tt.answer)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			req := idem.Request{Key: "k", URL: v.srv.URL + "/payments", Body: []byte(`{"orderId":"order-1","amount":700,"currency":"EUR"}`)}
			res, err := c.Submit(t.Context(), req)
			if tt.kind == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.kind)
				require.NotErrorIs(t, err, idem.ErrKeyConflict, "our own payment's decline is no key conflict")
			}
			require.Equal(t, tt.state, res.State)
			require.Equal(t, "6gHJtooK6", res.ResourceID)
			require.True(t, res.Replayed, "the server's stored word for the key, not a fresh execution")
			require.Empty(t, res.Review)
			v.requireKeys(t, "X-Idempotency-Key", "k", 2)

			_, err = c.Submit(t.Context(), req)
			if tt.kind == nil {
				require.NoError(t, err)
			}
			v.requireKeys(t, "X-Idempotency-Key", "k", 2)
		})
	}
}

// behindMesh is a server that never replays (Primer, Banking Circle)
// behind a sidecar with Istio's default retry policy (a 503 from the
// upstream is retried, POST or not: retriable_status_codes 503,
// istio/istio#13851): the first copy of the submit makes the payment, the
// sidecar hears a reset and sends the same request again, and the
// server's answer to that copy, answer, is all the client hears. The
// key's payment is ours, though nothing says so.
type behindMesh struct {
	mu       sync.Mutex
	payments int
	copies   int
	answer   shape
}

func (p *behindMesh) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.payments == 0 {
		p.payments++ // the first copy, whose 503 the sidecar retried
		p.copies++
	}
	p.copies++
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.answer.status)
	_, _ = io.WriteString(w, p.answer.body)
}

// To a first attempt, the answer says some request with the key was
// processed, perhaps ours: never a failure that invites the same payment
// under a new key, and never that payment taken for ours either.
func TestKeyAlreadyExistsToAFirstAttempt(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer shape
	}{
		{"primer 409", primerKeyExists(http.StatusConflict, "SETTLED")},
		{"primer 400", primerKeyExists(http.StatusBadRequest, "SETTLED")},
		{"banking circle 400", bankingCircleUsed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &behindMesh{answer: tt.answer}
			srv := httptest.NewServer(http.HandlerFunc(p.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			req := idem.Request{Key: "k", URL: srv.URL + "/payments", Body: []byte(`{"orderId":"order-1","amount":700,"currency":"EUR"}`)}
			res, err := c.Submit(t.Context(), req)
			requireForeignKey(t, res, err)

			op, err := c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			_, err = c.Do(t.Context(), op)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.NotErrorIs(t, err, idem.ErrFailed)

			p.mu.Lock()
			defer p.mu.Unlock()
			require.Equal(t, 1, p.payments, "payments")
			require.Equal(t, 2, p.copies, "copies reaching Primer: ours and the sidecar's, nothing resent")
		})
	}
}

// A declined payment under the key is refused whoever sent it, and
// nothing runs after it: failed, as a stored refusal is.
func TestKeyAlreadyExistsDeclinedToAFirstAttempt(t *testing.T) {
	v := newVendor(t, primerKeyExists(http.StatusConflict, "DECLINED"))
	res, err := v.submit(t, idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Empty(t, res.Review)
	v.requireKeys(t, "X-Idempotency-Key", "k", 1)
}
