package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// ignoringCharges is an endpoint that does not de-duplicate by the key and
// says so (Solidgate's "Idempotency-Status: ignored",
// https://api-docs.solidgate.com/api/v2/idempotent-requests): its first
// request charges the card and gets no answer to the client (lost);
// every later one is a new payment the issuer declines, the funds being
// taken.
type ignoringCharges struct {
	srv *httptest.Server
	// lose ends the first request without an answer, once it charged.
	lose func(w http.ResponseWriter, r *http.Request)

	mu      sync.Mutex
	keys    []string
	charged int
}

func newIgnoringCharges(t testing.TB, lose func(w http.ResponseWriter, r *http.Request)) *ignoringCharges {
	s := &ignoringCharges{lose: lose}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		first := len(s.keys) == 1
		if first {
			s.charged++
		}
		s.mu.Unlock()
		if first {
			s.lose(w, r)
			return
		}
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"id":"pay_2","status":"declined","reason":"insufficient funds"}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// numbered is a server that hands each request, body read, to answer with
// its number (1 for the first), and counts them.
type numbered struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   int
}

func newNumbered(t testing.TB, answer func(n int, w http.ResponseWriter, r *http.Request)) *numbered {
	s := &numbered{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.n++
		n := s.n
		s.mu.Unlock()
		answer(n, w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *numbered) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// loseAnswer closes the connection without an answer: lost on the way.
func loseAnswer(w http.ResponseWriter, _ *http.Request) {
	dropConnection(w)
}

func (s *ignoringCharges) req() idem.Request {
	return idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)}
}

func (s *ignoringCharges) requireSent(t testing.TB, keys []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, keys, s.keys, "requests by key")
	require.Equal(t, 1, s.charged, "charges")
}

// The Solidgate sequence across a restart: the checkout's call ended
// (its deadline) while the charge's answer was on the way, and Resume's
// resend, a new payment there, was declined. The operation settles failed
// and flagged ReviewMaybeTwice, and Resume's Summary counted it Failed,
// with Review 0: a start-up report (or a script that re-offers the
// checkout of every failed payment) read a charged card as a clean
// failure. A flagged operation is counted as Review, settled or not.
func TestResumeCountsAContradictedFailureForReview(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := newIgnoringCharges(t, func(_ http.ResponseWriter, r *http.Request) {
		cancel() // the caller gives up while the charge's answer is due
		<-r.Context().Done()
	})
	var mu sync.Mutex
	var settled []*idem.Result
	c := clientFor(t, s.srv, idemtest.NewClock(epoch), idem.WithSettleFunc(func(r *idem.Result) {
		mu.Lock()
		settled = append(settled, r)
		mu.Unlock()
	}))
	_, err := c.Submit(ctx, s.req())
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)

	sum, err := c.Resume(t.Context())
	require.NoError(t, err)

	require.Equal(t, idem.Summary{Visited: 1, Review: 1}, sum, "a failure an earlier copy's charge contradicts is no clean failure")
	s.requireSent(t, []string{"k", "k"})
	rec, err := c.Record(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, rec.State, "the answer's state, as settled")
	require.Equal(t, idem.ReviewMaybeTwice, rec.Review)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, settled, 1, "settle func calls")
	require.Equal(t, idem.ReviewMaybeTwice, settled[0].Review, "the settle func's Result says a person must look")
}

// The Solidgate sequence in one call: the charge's answer lost, the
// resend a new payment, declined. The call is told ErrNeedsReview, and
// the operation is settled failed and flagged ReviewMaybeTwice; but
// Stats counted only open operations as Review, so the flagged gauge
// (idemotel's idem.operations.flagged, admin's /stats "review") stayed 0
// and the alert "flagged > 0: a person must decide" never fired for a
// card that may have been charged twice, while idem stats (the journal's
// count) said 1.
func TestStatsCountsSettledOperationsFlaggedForReview(t *testing.T) {
	s := newIgnoringCharges(t, loseAnswer)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), s.req())
	requireContradicted(t, res, err, idem.ReviewMaybeTwice)
	s.requireSent(t, []string{"k", "k"})

	st, err := c.Stats(t.Context())
	require.NoError(t, err)
	require.True(t, st.Complete)
	require.Equal(t, map[idem.State]int{idem.StateFailed: 1}, st.ByState)
	require.Zero(t, st.Open)
	require.Equal(t, 1, st.Review, "flagged for a person, though settled")
}

// Adyen's refusal for another payment carrying the same merchantReference
// (refusedElsewhere) reaches Confirm while our first /payments request
// is on the wire; ours authorises, and its answer is lost (the connection
// drops after the server committed). Adyen has no result endpoint: the
// call cannot learn what its request did, and the event, about another
// pspReference, cannot say either. The event is the server's word, and
// settles the operation (the Settle hook fires, failed); the lost answer
// to a request sent before it contradicts it, so the call is told
// ErrNeedsReview, never ErrFailed. Default settings but the clock.
func TestWebhookFailureWhileFirstAnswerLost(t *testing.T) {
	srv := newServer(t)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	tr := &confirmOnSend{base: srv.Client().Transport}
	var mu sync.Mutex
	settled := map[idem.State]int{}
	c := journaledClient(t, idem.WithClock(idemtest.NewClock(epoch)),
		idem.WithHTTPClient(&http.Client{Transport: tr}),
		idem.WithHooks(idem.Hooks{Settle: func(_ context.Context, r *idem.Result) {
			mu.Lock()
			settled[r.State]++
			mu.Unlock()
		}}))
	tr.confirm = func() error { return refusedElsewhere(c) }

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"n":1}`)})
	require.NoError(t, tr.err, "Confirm() while the request was on the wire")

	requireContradicted(t, res, err, idem.ReviewConfirmConflict)
	var submits int
	for _, r := range srv.Requests() {
		if r.Key == "k" && r.Method != http.MethodGet {
			submits++
		}
	}
	require.Equal(t, 1, submits, "submits: nothing is sent for a settled operation")
	require.Equal(t, 1, srv.Stats().SideEffects, "payments")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[idem.State]int{idem.StateFailed: 1}, settled, "Settle hook calls, by the event")
}

// An order API behind Fiber's idempotency middleware (keys kept 30
// minutes by default, https://docs.gofiber.io/api/middleware/idempotency)
// takes every copy of the order while its answers are lost (a proxy that
// drops them), and the checkout's call hands the order off. The customer
// comes back 25 minutes later and the checkout calls Do again: past the
// key window (DefaultKeyRetention, 20 minutes) nothing may be resent and
// the API has no result endpoint, so the operation is flagged "key
// expired" for a person; Run can never settle it. The call's error
// matched ErrUnknownOutcome and ErrKeyExpired but not ErrNeedsReview, so a
// checkout that sends ErrNeedsReview to a person (as the README's switch
// does) left it to a reconciler that never would: an order paid and never
// made, or made and never shipped, until someone read the review list.
// Every error for an operation flagged for review matches ErrNeedsReview.
func TestEveryCallForAFlaggedOperationMatchesNeedsReview(t *testing.T) {
	srv := newNumbered(t, func(_ int, w http.ResponseWriter, r *http.Request) { loseAnswer(w, r) })
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv.srv, clock)
	_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.srv.URL + "/orders", Body: []byte(`{"sku":"a"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrNeedsReview, "not flagged yet: Run settles it")
	sent := srv.count()

	clock.Advance(25 * time.Minute)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	for i := range 2 { // the call that flags it, and the next
		res, err := c.Do(t.Context(), op)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, "call %d", i+1)
		require.ErrorIs(t, err, idem.ErrKeyExpired, "call %d", i+1)
		require.ErrorIs(t, err, idem.ErrNeedsReview, "call %d: flagged for a person", i+1)
		require.Equal(t, idem.ReviewKeyExpired, res.Review)
		require.Equal(t, idem.StateUnknown, res.State)
	}
	require.Equal(t, sent, srv.count(), "nothing resent past the key window")
}

// Stripe declines a card (402 card_declined) and replays the stored 402
// for the key (https://docs.stripe.com/api/idempotent_requests). The
// checkout's first call ended while the decline's answer was on the way;
// a support agent, told by the customer that the card was charged (a
// pending authorisation of another purchase in the banking app), forced
// the operation succeeded (idem resolve -succeeded -force) while the
// checkout's retry was on the wire, and the replayed decline then
// contradicted it. Do returned no error, State succeeded: the order
// shipped unpaid, though the call's own answer said declined. A success
// contradicted by a failure is open, as a contradicted failure is:
// ErrNeedsReview and ErrUnknownOutcome, never nil, and the call's
// Result carries the answer. Default settings but the clock.
func TestSuccessContradictedByTheCallsOwnDeclineIsNoSuccess(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	srv := newNumbered(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			cancel() // the checkout gives up while the decline's answer is due
			<-r.Context().Done()
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = fmt.Fprint(w, `{"error":{"type":"card_error","code":"card_declined","message":"Your card was declined."}}`)
	})
	tr := &confirmOnSend{base: srv.srv.Client().Transport}
	var mu sync.Mutex
	hooks := map[string]int{}
	count := func(name string) func(context.Context, *idem.Result) {
		return func(context.Context, *idem.Result) {
			mu.Lock()
			hooks[name]++
			mu.Unlock()
		}
	}
	c := clientFor(t, srv.srv, idemtest.NewClock(epoch), idem.WithHTTPClient(&http.Client{Transport: tr}),
		idem.WithHooks(idem.Hooks{Settle: count("settle"), Review: count("review"),
			ConfirmConflict: func(ctx context.Context, r *idem.Result, _ idem.Confirmation) { count("conflict")(ctx, r) }}))
	_, err := c.Submit(ctx, idem.Request{Key: "k", URL: srv.srv.URL + "/v1/payment_intents", Body: []byte(`{"amount":1250}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	tr.confirm = func() error {
		_, err := c.Resolve(context.Background(), "", "k", idem.Resolution{State: idem.StateSucceeded, Reason: "customer sees the charge", By: "support", Force: true}) // while the retry is on the wire, on purpose
		return err
	}
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)

	res, err := c.Do(t.Context(), op)
	require.NoError(t, tr.err, "Resolve() while the retry was on the wire")

	require.Error(t, err, "the call's own answer says declined")
	require.NotErrorIs(t, err, idem.ErrFailed, "the agent may be right: no retry under a new key")
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateSucceeded, res.State, "the journal's state, as resolved")
	require.Equal(t, idem.ReviewConfirmConflict, res.Review)
	require.Equal(t, http.StatusPaymentRequired, res.StatusCode, "the call's own answer")
	require.Contains(t, string(res.Body), "card_declined")
	rec, err := c.Record(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State, "the resolution is kept")
	require.Equal(t, idem.ReviewConfirmConflict, rec.Review)
	// Asked again, the journal says the same until a person settles it.
	_, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, 2, srv.count(), "submits: the first and the retry; none after")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"settle": 1, "review": 1, "conflict": 1}, hooks, "hook calls: Resolve's settlement, the answer's conflict")
}

// Our /payments request is answered Authorised (psp_… named in the
// answer); then Adyen's AUTHORISATION notification with success "false"
// for another payment carrying the same merchantReference (the shopper's
// earlier card, refusedElsewhere) reaches Confirm: it names another
// pspReference, so it says nothing of ours, which stays a success (nil
// error) though flagged for a person. The same refusal naming no
// payment, or ours, disputes the success: ErrNeedsReview. Default
// settings but the clock.
func TestFailureEventAboutAnotherPaymentLeavesTheSuccess(t *testing.T) {
	for _, tt := range []struct {
		name     string
		event    string // the refusal's pspReference; "ours": the answer's
		disputed bool
	}{
		{"another payment", "psp_refused", false},
		{"ours", "ours", true},
		{"none named", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			c := journaledClient(t, idem.WithHTTPClient(srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/payments", Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			id := tt.event
			if id == "ours" {
				id = res.ResourceID
			}
			_, err = c.Confirm(t.Context(), "", "k", idem.Confirmation{
				State: idem.StateFailed, ResourceID: id, Source: "adyen", EventID: "AUTHORISATION:false", Reason: "Refused",
			})
			require.ErrorIs(t, err, idem.ErrConfirmConflict)

			op, err := c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State, "the answer's success is kept")
			require.Equal(t, idem.ReviewConfirmConflict, op.Review)
			res, err = c.Do(t.Context(), op)
			if tt.disputed {
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.NotErrorIs(t, err, idem.ErrFailed)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, idem.ReviewConfirmConflict, res.Review)
			require.Equal(t, 1, srv.Stats().Submits, "submits")
			require.Equal(t, 1, srv.Stats().SideEffects, "payments")
		})
	}
}
