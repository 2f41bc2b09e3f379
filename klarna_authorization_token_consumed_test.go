package idem_test

import (
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

// klarnaAuthorizations is Klarna Payments' create order for a one-time
// payment, POST /payments/v1/authorizations/{authorizationToken}/order:
// "When you receive a success response, the customer gets charged and the
// Klarna payments session is closed", and an authorization token it no
// longer takes is refused 404 NOT_FOUND, "Invalid authorization token"
// (https://docs.klarna.com/klarna-payments/integrate-with-klarna-payments/step-3-create-an-order/create-a-one-time-payment-order/),
// in Klarna's error envelope (error_code, error_messages, correlation_id;
// https://docs.klarna.com/resources/error-details/errors-in-klarna-payments/
// lists 404 NOT_FOUND and 404 SESSION_COMPLETED). Klarna-Idempotency-Key
// is documented for the Order Management API only
// (https://docs.klarna.com/api/escalation-and-retry-policy/, "This
// applies only to Order Management API"): nothing de-duplicates a resend
// of the create order but the token, which the first order consumed.
// Modelled: a consumed token is answered as an expired one is, with the
// refusal set per fake; and drop loses the answer to the first order
// placed (the connection closed after the order was made).
type klarnaAuthorizations struct {
	mu       sync.Mutex
	refusal  string
	drop     bool
	orders   map[string]int // authorization token: orders placed with it
	keys     []string       // Klarna-Idempotency-Key of each POST
	consumed map[string]bool
}

func newKlarnaAuthorizations(t *testing.T, refusal string, drop bool) (*klarnaAuthorizations, *httptest.Server) {
	t.Helper()
	k := &klarnaAuthorizations{refusal: refusal, drop: drop, orders: map[string]int{}, consumed: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(srv.Close)
	return k, srv
}

func (k *klarnaAuthorizations) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	token := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/payments/v1/authorizations/"), "/order")
	k.mu.Lock()
	k.keys = append(k.keys, r.Header.Get("Klarna-Idempotency-Key"))
	// Only "authorized" tokens were ever issued; any other is expired.
	place := strings.HasPrefix(token, "authorized") && !k.consumed[token]
	if place {
		k.consumed[token] = true
		k.orders[token]++
	}
	drop := place && k.drop
	k.mu.Unlock()
	if drop {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if !place {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, k.refusal)
		return
	}
	_, _ = io.WriteString(w, `{"order_id":"3eaeb557-5e30-47f8-b840-b8d987f5945d","redirect_url":"https://payments.klarna.com/redirect/abc",`+
		`"fraud_status":"ACCEPTED","authorized_payment_method":{"type":"invoice"}}`)
}

// requireKeys asserts n POSTs, each carrying key.
func (k *klarnaAuthorizations) requireKeys(t *testing.T, key string, n int) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	require.Len(t, k.keys, n, "POSTs")
	for i, got := range k.keys {
		require.Equalf(t, key, got, "POST %d: Klarna-Idempotency-Key", i+1)
	}
}

// A create order whose answer was lost placed the order and consumed the
// token; every resend is refused 404 as an expired token is. That refusal
// is about the order our first POST placed: failed, the caller would tell
// the customer the payment failed while the order exists and is
// captured, or place it again under a new authorization. It is asked
// about again, then left for a person after three refusals, never
// failed, and Resume sends it no more. To a first POST (nothing of ours
// ran) the same 404 is the token's own failure.
// A guard: idem already judged it so (refusedAfterMaybeSent); failing
// the resend's 404 there fails the first two rows.
func TestKlarnaAuthorizationTokenConsumed(t *testing.T) {
	const (
		notFound = `{"error_code":"NOT_FOUND","error_messages":["Invalid authorization token"],` +
			`"correlation_id":"6a9b1cb1-73a3-4936-a030-481ba4bb203b"}`
		// Modelled: the errors page names the code, not its words.
		completed = `{"error_code":"SESSION_COMPLETED","error_messages":["Session is already completed"],` +
			`"correlation_id":"6a9b1cb1-73a3-4936-a030-481ba4bb203b"}`
		order = `{"purchase_country":"SE","purchase_currency":"SEK","locale":"sv-SE","order_amount":10000,"order_tax_amount":0}`
	)
	for name, refusal := range map[string]string{"NOT_FOUND": notFound, "SESSION_COMPLETED": completed} {
		t.Run(name+" after a lost answer", func(t *testing.T) {
			k, srv := newKlarnaAuthorizations(t, refusal, true)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Klarna-Idempotency-Key", idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", Body: []byte(order),
				URL: srv.URL + "/payments/v1/authorizations/authorized-0b1d9815/order"})
			requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, "", idem.ReviewRefusedAfterSend)
			requireRefusedAfterSend(t, c, res, err, "k", "order")
			k.requireKeys(t, "k", 4) // the lost one, then three refusals
			require.Equal(t, map[string]int{"authorized-0b1d9815": 1}, k.orders)

			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, 1, sum.Review)
			require.Zero(t, sum.Failed)
			k.requireKeys(t, "k", 4)
		})
	}
	t.Run("to a first attempt", func(t *testing.T) {
		k, srv := newKlarnaAuthorizations(t, notFound, false)
		c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Klarna-Idempotency-Key", idem.KeyBare))
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", Body: []byte(order),
			URL: srv.URL + "/payments/v1/authorizations/expired-0b1d9815/order"})
		requireOutcome(t, res, err, idem.StateFailed, []error{idem.ErrFailed}, "", "")
		require.Equal(t, "404: NOT_FOUND: Invalid authorization token", res.Reason)
		k.requireKeys(t, "k", 1)
		require.Empty(t, k.orders)
	})
}
