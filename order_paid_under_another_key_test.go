package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// paidOrderServer is a payment API that keeps an idempotency store by
// the Idempotency-Key header and pays order o-1 once: the first payment
// of it is made (201, pay_1) and stored for its key, a later request
// under that key is answered from the store, marked Idempotent-Replayed;
// any payment under another key is refused, status refusal, "Order
// already paid", and nothing stored for that key. With orderFirst the
// order's state is checked before the store, so a resend of the payment
// that paid it is refused so too; with lost, that payment's answer is
// lost to a gateway's 502. GET /v1/payments/by-key/{key} answers the
// payment a key made, 404 when none, and to the first lag queries.
//
// The 409 is modelled on Worldline's acquiring API, which keeps an
// Idempotency-Key and answers 409 both for a state that refuses the
// request ("Incorrect state : You are trying to execute an action on a
// resource whose state does not allow such action") and for a key in
// flight ("You have submitted the same request while the previous one is
// still being processed"),
// https://docs.acquiring.worldline-solutions.com/Developer-Tools/API/error-handling/conflict,
// and on Gett's 409 ORDER_ALREADY_PLACED under an Idempotency-Key, sent
// when "the cart referenced has already been turned into a placed
// order" ("Do not retry. Treat the user's order as already placed"),
// https://developer.gett-tech.com/errors/ORDER_ALREADY_PLACED, which
// Gett calls a "Reserved error code — not currently emitted by any
// endpoint", and which its server checks the key before: "A clean retry
// with the same idempotency key and the same body returns the original
// successful response, not this error". Only the status is modelled on
// it: the order checked before the key, and the words, "Order already
// paid" under ORDER_ALREADY_PAID, are modelled, as alreadyPaidOrder's are
// (WeChat Pay's ORDERPAID).
type paidOrderServer struct {
	srv        *httptest.Server
	refusal    int
	orderFirst bool
	lost       bool
	lag        int    // queries answered 404 before the stored payments show
	words      string // the refusal's body, if not "Order already paid"'s

	mu      sync.Mutex
	charges int
	sends   map[string]int
	queries int
	stored  map[string]string // key: the payment's body
}

func newPaidOrderServer(t *testing.T, refusal int) *paidOrderServer {
	t.Helper()
	s := &paidOrderServer{refusal: refusal, sends: map[string]int{}, stored: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if key, ok := strings.CutPrefix(r.URL.Path, "/v1/payments/by-key/"); ok && r.Method == http.MethodGet {
			s.queries++
			if body, ok := s.stored[key]; ok && s.queries > s.lag {
				_, _ = io.WriteString(w, body)
				return
			}
			resultNotFound(w)
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		s.sends[key]++
		body, ok := s.stored[key]
		switch {
		case ok && !s.orderFirst:
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, body)
		case s.charges > 0:
			w.WriteHeader(s.refusal)
			words := s.words
			if words == "" {
				words = `{"error":{"code":"ORDER_ALREADY_PAID","message":"Order already paid"}}`
			}
			_, _ = io.WriteString(w, words)
		default:
			s.charges++
			s.stored[key] = fmt.Sprintf(`{"id":"pay_%d","status":"succeeded"}`, s.charges)
			if s.lost {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, s.stored[key])
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// requireSent asserts the server's charges and the submits of each key.
func (s *paidOrderServer) requireSent(t *testing.T, charges int, sends map[string]int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, charges, s.charges, "charges")
	require.Equal(t, sends, s.sends, "submits per key")
}

// paidByA opens a client at default settings on a new journal (open)
// and pays order o-1 under key a, pay_1.
func (s *paidOrderServer) paidByA(t *testing.T) (c *idem.Client, stop func(), clock *idemtest.Clock, path string) {
	t.Helper()
	clock = idemtest.NewClock(epoch)
	path = t.TempDir() + "/idem.journal"
	c, stop = s.open(t, path, clock)
	res, err := c.Submit(t.Context(), s.pay("a", false))
	require.NoError(t, err)
	require.Equal(t, "pay_1", res.ResourceID)
	return c, stop, clock, path
}

// refuseK opens a client at default settings on a new journal, sends a
// (to be made) and then k (to be refused), req building each, and
// returns k's result, restart, which asserts a sent once,
// k once, then closes the client, opens another on the journal and
// asserts that its Resume, five minutes on, leaves k unknown,
// ReviewRefusedAfterSend, sending nothing.
func (s *paidOrderServer) refuseK(t *testing.T, req func(key string) idem.Request) (res *idem.Result, restart func(), err error) {
	t.Helper()
	clock := idemtest.NewClock(epoch)
	path := t.TempDir() + "/idem.journal"
	c, stop := s.open(t, path, clock)
	_, err = c.Submit(t.Context(), req("a"))
	require.NoError(t, err)
	res, err = c.Submit(t.Context(), req("k"))
	return res, func() {
		t.Helper()
		s.requireSent(t, 1, map[string]int{"a": 1, "k": 1})
		stop()
		c, _ = s.open(t, path, clock)
		op := resumeK(t, c, clock, 5*time.Minute)
		require.Equal(t, idem.StateUnknown, op.State)
		require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)
		s.requireSent(t, 1, map[string]int{"a": 1, "k": 1})
	}, err
}

// requireQueries asserts the server's result queries.
func (s *paidOrderServer) requireQueries(t *testing.T, queries int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, queries, s.queries, "result queries")
}

// requireKPaidOnce submits k with its result endpoint at default
// settings and asserts it settled succeeded with the one payment of the
// order, pay_1, after sends submits of k and queries result queries.
func (s *paidOrderServer) requireKPaidOnce(t *testing.T, sends, queries int) {
	t.Helper()
	res, err := clientFor(t, s.srv, idemtest.NewClock(epoch)).Submit(t.Context(), s.pay("k", true))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "pay_1", res.ResourceID)
	require.Empty(t, res.Review)
	s.requireSent(t, 1, map[string]int{"k": sends})
	s.requireQueries(t, queries)
}

func (s *paidOrderServer) pay(key string, result bool) idem.Request {
	req := idem.Request{Key: key, URL: s.srv.URL + "/v1/orders/o-1/payments", Body: []byte(`{"amount":100}`)}
	if result {
		req.ResultURL = s.srv.URL + "/v1/payments/by-key/" + key
	}
	return req
}

// open is a client at default settings on the journal at path, and what
// closes both, as a process stopping does.
func (s *paidOrderServer) open(t *testing.T, path string, clock *idemtest.Clock) (*idem.Client, func()) {
	t.Helper()
	store, err := journal.Open(path)
	require.NoError(t, err)
	c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock))
	require.NoError(t, err)
	stop := func() { _ = c.Close(); _ = store.Close() }
	t.Cleanup(stop)
	return c, stop
}

// Payment a pays order o-1; payment k of the same order, under its own
// key, is refused "Order already paid" on its first attempt. The payment
// that paid the order may be a copy of k a proxy sent first, its answer
// lost (the server checks the order before the key): failed, k would be
// paid again under a new key. The 409 was read as k's key in flight and
// resent (five submits in the call, five more per Resume pass until the
// key window); the 422 and the 400 as the key "already used",
// ErrKeyConflict, though no key was reused; then all three failed. With
// no result endpoint to ask by the key: unknown, ReviewRefusedAfterSend
// (ErrNeedsReview, not ErrKeyConflict), its error saying the order is
// paid, maybe by a copy of this request; k sent once, and a restarted
// client's Resume sends nothing.
func TestOrderPaidUnderAnotherKeyWithoutAResultEndpointIsLeftUnknown(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusUnprocessableEntity, http.StatusBadRequest} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s := newPaidOrderServer(t, status)
			res, restart, err := s.refuseK(t, func(key string) idem.Request { return s.pay(key, false) })
			requireOrderPaidUnknown(t, res, err)
			require.Equal(t, 1, res.Attempts)
			restart()
		})
	}
}

// resumeK is k after clock advanced by d and a Resume of c.
func resumeK(t *testing.T, c *idem.Client, clock *idemtest.Clock, d time.Duration) *idem.Operation {
	t.Helper()
	clock.Advance(d)
	_, err := c.Resume(t.Context())
	require.NoError(t, err)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	return op
}

// requireOrderPaidUnknown asserts a payment's "Order already paid" left
// unknown for a person: flagged ReviewRefusedAfterSend, no key conflict,
// the error saying the order is paid, maybe by a copy of this request.
func requireOrderPaidUnknown(t *testing.T, res *idem.Result, err error) {
	t.Helper()
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "no key was reused")
	require.NotContains(t, err.Error(), "idempotency key already used")
	require.Contains(t, err.Error(), "Order already paid")
	require.Contains(t, err.Error(), "copy of this request")
	require.Contains(t, err.Error(), "ask the provider")
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
}

// With a result endpoint, the first attempt's "Order already paid" is
// asked about by the key, which this server keeps, so its answer is
// about ours. A copy of k a mesh sent first paid the order under k, its
// answer lost (Envoy's retry_on "reset": "Envoy will attempt a retry if
// the upstream server does not respond due to a reset",
// https://github.com/envoyproxy/envoy/pull/7505; the copy sent before
// ours is modelled by storing it), and the server, checking the
// order before the key, refused k "Order already paid": the endpoint
// names k's payment, settled succeeded, pay_1, where k failed and the
// caller paid again. Payment a paid it, and the endpoint does not find
// k: unknown while the read path may lag (WithResultLag's default, past
// the call's budget), then, a restarted client's Resume asking once the
// lag is over, failed with the server's reason and that the order is
// paid. k sent once in each, Resume sending no submit.
func TestOrderPaidToAFirstAttemptAsksTheResultEndpoint(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusBadRequest} {
		t.Run(fmt.Sprint(status, " a copy of ours paid"), func(t *testing.T) {
			s := newPaidOrderServer(t, status)
			s.orderFirst = true
			s.charges, s.stored["k"] = 1, `{"id":"pay_1","status":"succeeded"}` // the mesh's copy of k
			s.requireKPaidOnce(t, 1, 1)
		})
		t.Run(fmt.Sprint(status, " another key paid"), func(t *testing.T) {
			s := newPaidOrderServer(t, status)
			c, stop, clock, path := s.paidByA(t)

			res, err := c.Submit(t.Context(), s.pay("k", true))
			requireOrderPaidUnknown(t, res, err)
			s.requireSent(t, 1, map[string]int{"a": 1, "k": 1})
			stop()

			s.requireResumeFailsK(t, path, clock, "Order already paid", "the order is paid already")
		})
	}
}

// requireResumeFailsK opens a client on the journal at path, as a
// restarted process does, and asserts that its Resume leaves k unknown,
// ReviewRefusedAfterSend, while the result endpoint may lag, and fails
// it once the lag is over, its reason holding each of reason; a sent
// once, k once, three result queries in all. The restarted process
// counts the lag from its start, as its clock may read otherwise than
// the one that sent k: its first Resume finds k lagging, the next, past
// it, fails k.
func (s *paidOrderServer) requireResumeFailsK(t *testing.T, path string, clock *idemtest.Clock, reason ...string) {
	t.Helper()
	c, _ := s.open(t, path, clock)
	op := resumeK(t, c, clock, 5*time.Minute)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)
	op = resumeK(t, c, clock, idem.DefaultResultLag)
	require.Equal(t, idem.StateFailed, op.State)
	require.Empty(t, op.Review)
	require.NotNil(t, op.Result)
	for _, r := range reason {
		require.Contains(t, op.Result.Reason, r)
	}
	s.requireSent(t, 1, map[string]int{"a": 1, "k": 1})
	s.requireQueries(t, 3)
}

// The payment that paid the order may be ours: k's first attempt pays
// it and its answer is lost to a 502, and the server checks the order's
// state before its idempotency store, so k's resend is refused "Order
// already paid". Failed, the caller would pay again; resent, the server
// refuses so forever. The 409 was read as k's own request in flight and
// resent until the budget ended (five submits, left open); the 422 and
// the 400 were resent thrice, then left for a person. Neither is resent:
// with no result endpoint, unknown at once, flagged
// ReviewRefusedAfterSend (a refusal after a send that may have
// executed), ErrNeedsReview and no key conflict, two submits, and a
// restarted client's Resume sends nothing; with a result endpoint whose
// read path lags (its first answer a 404, so the key is resent), the
// key's payment it then names settles k succeeded, pay_1.
func TestOrderPaidAfterOurSendIsNeverResent(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusUnprocessableEntity, http.StatusBadRequest} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s := newPaidOrderServer(t, status)
			s.orderFirst, s.lost = true, true
			clock := idemtest.NewClock(epoch)
			path := t.TempDir() + "/idem.journal"
			c, stop := s.open(t, path, clock)

			res, err := c.Submit(t.Context(), s.pay("k", false))
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.NotErrorIs(t, err, idem.ErrKeyConflict)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
			s.requireSent(t, 1, map[string]int{"k": 2})
			stop()

			c, _ = s.open(t, path, clock)
			op := resumeK(t, c, clock, 5*time.Minute)
			require.Equal(t, idem.StateUnknown, op.State)
			require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)
			s.requireSent(t, 1, map[string]int{"k": 2})
		})
		t.Run(fmt.Sprint(status, " result endpoint"), func(t *testing.T) {
			s := newPaidOrderServer(t, status)
			s.orderFirst, s.lost, s.lag = true, true, 1
			s.requireKPaidOnce(t, 2, 2)
		})
	}
}

// The same 409 to a refund of the paid order is the order's state too,
// and no copy of a refund paid it (changesState): it was read as the
// refund's key in flight and resent, five submits and left pending;
// failed at once, one submit, without the words for a payment, as its 400
// is (TestAlreadyPaidRefusesACancelForTheOrdersState).
func TestOrderPaidRefusesARefundAtOnce(t *testing.T) {
	s := newPaidOrderServer(t, http.StatusConflict)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	_, err := c.Submit(t.Context(), s.pay("a", false))
	require.NoError(t, err)

	res, err := c.Submit(t.Context(), idem.Request{Key: "r", URL: s.srv.URL + "/v1/orders/o-1/refunds", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.StateFailed, res.State)
	require.NotContains(t, res.Reason, "the order is paid already", "a refund pays nothing")
	s.requireSent(t, 1, map[string]int{"a": 1, "r": 1})
}

// "Did not execute" answers before it leave nothing of ours that may have
// paid but a copy a proxy sent: a 429 (throttled, not executed), then the
// 409 "Order already paid", is left unknown, ReviewRefusedAfterSend, at
// the second submit, as a first attempt's (it was failed). After a 409
// saying another request holds the key (Stripe's in-progress
// idempotency_error), that request may be a copy of ours a mesh sent, and
// the payment that paid the order its: left for a person as the key's
// other holder is, unknown, ReviewKeyInUse (ErrKeyConflict), never
// failed; it was resent as the key in flight until the budget ended. Two
// submits each, same key.
func TestOrderPaidAfterDidNotExecuteAnswers(t *testing.T) {
	paid := shape{status: http.StatusConflict, body: `{"error":{"code":"ORDER_ALREADY_PAID","message":"Order already paid"}}`}
	req := func(v *vendor) idem.Request {
		return idem.Request{Key: "k", URL: v.srv.URL + "/v1/orders/o-1/payments", Body: []byte(`{"amount":100}`)}
	}

	v := newVendor(t, shape{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"1"}}}, paid)
	res, err := clientFor(t, v.srv, idemtest.NewClock(epoch)).Submit(t.Context(), req(v))
	requireOrderPaidUnknown(t, res, err)
	v.requireKeys(t, "Idempotency-Key", "k", 2)

	v = newVendor(t, shape{status: http.StatusConflict, body: stuckBody}, paid)
	res, err = clientFor(t, v.srv, idemtest.NewClock(epoch)).Submit(t.Context(), req(v))
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewKeyInUse, res.Review)
	v.requireKeys(t, "Idempotency-Key", "k", 2)
}

// "Never resent" holds for the caller's own calls too: after k's first
// attempt was refused "Order already paid" and left unknown (the result
// endpoint lagging), a second Submit of k, and a Do, sent k again (the
// query's "not found" while lagging let the resend go), two submits of k,
// where the server refuses it so forever and a copy of ours may have
// paid. Now the query alone: the second Submit leaves k unknown,
// ReviewRefusedAfterSend, and a Do once the lag is over fails it with the
// server's reason and that the order is paid; k sent once in all.
func TestOrderPaidIsNotResentByTheCallersOwnCalls(t *testing.T) {
	s := newPaidOrderServer(t, http.StatusConflict)
	c, _, clock, _ := s.paidByA(t)

	res, err := c.Submit(t.Context(), s.pay("k", true))
	requireOrderPaidUnknown(t, res, err)
	res, err = c.Submit(t.Context(), s.pay("k", true))
	requireOrderPaidUnknown(t, res, err)
	s.requireSent(t, 1, map[string]int{"a": 1, "k": 1})
	s.requireQueries(t, 2)

	clock.Advance(idem.DefaultResultLag)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	res, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Contains(t, res.Reason, "Order already paid")
	require.Contains(t, res.Reason, "the order is paid already")
	s.requireSent(t, 1, map[string]int{"a": 1, "k": 1})
	s.requireQueries(t, 3)
}
