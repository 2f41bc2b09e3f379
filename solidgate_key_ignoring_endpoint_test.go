package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// keyIgnoringCharges is a Solidgate payment endpoint that does not
// de-duplicate by the key: "Idempotency support varies by endpoint. Send
// the request with an Idempotency-Key header and check the
// Idempotency-Status value. A value of ignored means the endpoint does
// not" (https://api-docs.solidgate.com/api/v2/idempotent-requests). Every
// request it gets charges the card afresh (pay_1, pay_2, …). answer ends
// request n once it charged. A GET is a query of the order's status
// (answerFrom), which charges nothing.
type keyIgnoringCharges struct {
	srv    *httptest.Server
	answer func(n int, w http.ResponseWriter)

	mu      sync.Mutex
	keys    []string // the Idempotency-Key of each request, in order
	queries int
	result  func(n int, w http.ResponseWriter) // answers query n
}

func newKeyIgnoringCharges(t testing.TB, answer func(n int, w http.ResponseWriter)) *keyIgnoringCharges {
	s := &keyIgnoringCharges{answer: answer, result: func(_ int, w http.ResponseWriter) { orderNotFound(w) }}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		if r.Method == http.MethodGet {
			s.queries++
			n, result := s.queries, s.result
			s.mu.Unlock()
			result(n, w)
			return
		}
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		n := len(s.keys)
		s.mu.Unlock()
		s.answer(n, w)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// charged returns the Idempotency-Key of each payment request, in order,
// leaving out the clock's HEAD probe (no key), which charges nothing.
func (s *keyIgnoringCharges) charged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for _, k := range s.keys {
		if k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

func (s *keyIgnoringCharges) requireCharges(t testing.TB, keys []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, keys, s.keys, "charges, by the key each request carried")
}

// ignoredInternalError is the endpoint's 500 after the payment it made:
// marked, as every answer of the endpoint is, as ignoring the key
// (modelled on the page above: the status is the endpoint's, whatever
// the answer).
func ignoredInternalError(w http.ResponseWriter) {
	w.Header().Set("Idempotency-Status", "ignored")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = fmt.Fprint(w, `{"error":{"code":"5.01","message":"internal error"}}`)
}

// cardOrderUpdated is the Confirmation a handler of Solidgate's "Updated
// Card Order" webhook ("reflects a change in the status of a card order",
// https://docs.solidgate.com/payments/integrate/webhooks/) makes of one
// payment's event, its event_id naming the delivery ("deduplicating
// webhook deliveries, which use the event_id field",
// https://api-docs.solidgate.com/api/v2/idempotent-requests).
func cardOrderUpdated(state idem.State, payment, eventID string) idem.Confirmation {
	return idem.Confirmation{State: state, ResourceID: payment, Source: "solidgate", EventID: eventID, Reason: "card_order.updated"}
}

// secondAnswerLost charges each payment (pay_n) and answers 201, marked
// ignored, but for the second, whose answer is lost.
func secondAnswerLost(n int, w http.ResponseWriter) {
	if n == 2 {
		dropConnection(w) // pay_2 charged, its answer lost
		return
	}
	ignoredCreated(n, w)
}

// ignoredCreated answers 201 for payment pay_n, marked ignored.
func ignoredCreated(n int, w http.ResponseWriter) {
	w.Header().Set("Idempotency-Status", "ignored")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled"}`, n)
}

// answerFrom makes the order's status endpoint answer query n and those
// after it with result; those before, not found. The endpoint, GET
// /api/v1/orders/{order_id} beside the payment endpoint, is modelled on
// Solidgate's order status, by the merchant's reference: an order
// "remains in this state until a payment attempt occurs" and then moves
// to approval or decline
// (https://docs.solidgate.com/payments/payments-insights/payments-types-and-statuses/);
// it tells of the order's last payment only, whatever charged before it.
func (s *keyIgnoringCharges) answerFrom(n int, result func(w http.ResponseWriter)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result = func(i int, w http.ResponseWriter) {
		if i < n {
			orderNotFound(w)
			return
		}
		result(w)
	}
}

func (s *keyIgnoringCharges) requireSeen(t testing.TB, keys []string, queries int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, keys, s.keys, "charges, by the key each request carried")
	require.Equal(t, queries, s.queries, "status queries")
}

// orderNotFound is the status endpoint before the order reaches its read
// path (modelled): nothing said of the payments.
func orderNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"error":{"code":"2.01","message":"order not found"}}`)
}

// orderStatus is the status endpoint's answer naming the order's last
// payment, in status.
func orderStatus(payment, status string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":%q,"order_id":"o-1","status":%q}`, payment, status)
	}
}

// lostThenIgnored charges twice for one payment: the first charge's answer
// is lost (pay_1), so idem resends with the same key, and the resend
// charges again (pay_2), answered 500 marked ignored.
func lostThenIgnored(n int, w http.ResponseWriter) {
	if n == 1 {
		dropConnection(w)
		return
	}
	ignoredInternalError(w)
}

// refunded is the answer to a refund to another endpoint of the host, not
// marked (modelled): it leaves a connection to reuse and says nothing of
// the charge endpoint.
func refunded(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprint(w, `{"id":"ref_1","status":"refunded"}`)
}

// twoLostThen charges each payment: the first two (k's, its caller
// giving up at the second: *stop, set under mu) with their answers lost,
// pay_1 and pay_2, and those after answered by then.
func twoLostThen(mu *sync.Mutex, stop *context.CancelFunc, then func(n int, w http.ResponseWriter)) func(n int, w http.ResponseWriter) {
	return func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			dropConnection(w) // pay_1 charged, its answer lost
		case 2:
			mu.Lock()
			(*stop)()
			mu.Unlock()
			dropConnection(w) // pay_2 charged, its answer lost
		default:
			then(n, w)
		}
	}
}

// submitUntilGivenUp submits payment k (order o-1) to s's charge endpoint
// through c, its caller giving up at the send whose answer calls *stop
// (set here, under mu): every answer lost before it, nothing said yet
// that the endpoint ignores the key, the call ends unknown and unflagged.
func submitUntilGivenUp(t *testing.T, c *idem.Client, s *keyIgnoringCharges, mu *sync.Mutex, stop *context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	mu.Lock()
	*stop = cancel
	mu.Unlock()
	res, err := c.Submit(ctx, idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit(k)")
	require.Empty(t, res.Review, "Submit(k): nothing said yet that the endpoint ignores the key")
}
