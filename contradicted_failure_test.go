package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// requireContradicted asserts what a caller is told of an operation
// settled failed while evidence says it may have executed: not ErrFailed,
// which invites a retry under a new key (a second charge), but an error
// for a person (ErrNeedsReview) that still says the outcome is open
// (ErrUnknownOutcome: never retry under a new key).
func requireContradicted(t testing.TB, res *idem.Result, err error, review string) {
	t.Helper()
	require.Error(t, err)
	require.NotErrorIs(t, err, idem.ErrFailed, "a failure a person must still settle is not one to retry anew")
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	var e *idem.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, idem.StateFailed, e.State, "the journal's state, as settled")
	require.NotNil(t, res)
	require.Equal(t, idem.StateFailed, res.State)
	require.Equal(t, review, res.Review)
}

// refusedElsewhere confirms key "k" failed with Adyen's AUTHORISATION
// notification (success "false") for another payment that carried the
// same merchantReference, the key.
func refusedElsewhere(c *idem.Client) error {
	_, err := c.Confirm(context.Background(), "", "k", idem.Confirmation{
		State: idem.StateFailed, ResourceID: "psp_refused", Source: "adyen", EventID: "psp_refused:AUTHORISATION:false", Reason: "Refused",
	})
	return err
}

// Adyen does not check a merchantReference for uniqueness, so with the key
// carried there an AUTHORISATION notification for another payment of the
// same order (the shopper's earlier card, refused: success "false") can
// reach Confirm while our /payments request is on the wire
// (https://docs.adyen.com/development-resources/webhooks/webhook-types/).
// Confirm settles the open operation failed; our request then authorises.
// The Submit used to return ErrFailed, and a checkout retries a failed
// payment under a new key: a second authorisation.
func TestWebhookFailureContradictedByAnswer(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, counts.options())
	tr := &confirmOnSend{base: e.srv.Client().Transport}
	c, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	tr.confirm = func() error { return refusedElsewhere(c) }
	res, err := c.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.NoError(t, tr.err, "Confirm() while the request was on the wire")

	requireContradicted(t, res, err, idem.ReviewConfirmConflict)
	require.Equal(t, http.StatusCreated, res.StatusCode, "the server's answer")
	require.Contains(t, string(res.Body), "ord_000001")
	require.Len(t, e.submits("k"), 1)
	require.Zero(t, e.queries("k"))
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "payments")

	late := requireAnswerKeptBeside(t, e, counts, 2)
	require.Equal(t, idem.StateSucceeded, late.State)
}

// requireAnswerKeptBeside asserts the journal of key "k" after the
// server's answer contradicted a failure: the failure kept and flagged,
// with n confirmations, the answer last (which it returns), and the
// conflict reported once.
func requireAnswerKeptBeside(t testing.TB, e *env, counts *settleCounts, n int) journal.Confirmation {
	t.Helper()
	rec := e.record("k")
	require.Equal(t, idem.StateFailed, rec.State, "the failure is kept")
	require.Equal(t, idem.ReviewConfirmConflict, rec.Review)
	require.Len(t, rec.Confirmations, n)
	late := rec.Confirmations[n-1]
	require.Equal(t, idem.ResponseSource, late.Source, "the server's answer, last")
	require.Equal(t, journal.ConfirmConflicted, late.Effect)
	require.Equal(t, 1, counts.get(counts.conflict, "k"), "ConfirmConflict hook calls")
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls")
	return late
}

// On an endpoint that does not de-duplicate by the key (Solidgate says so
// with "Idempotency-Status: ignored",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), a first
// copy whose answer was lost charged the card; idem's resend was a new
// payment, and the issuer declined it (the first took the funds). The
// answer settles the operation failed and flags it ReviewMaybeTwice, but
// the call returned ErrFailed: the checkout asked the customer to pay
// again, a second charge beside the one already taken.
func TestDeclineAfterMaybeExecutedCopyIsNotAFailure(t *testing.T) {
	s := newIgnoringCharges(t, loseAnswer)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), s.req())
	requireContradicted(t, res, err, idem.ReviewMaybeTwice)
	s.requireSent(t, []string{"k", "k"})

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, op.State)
	require.Equal(t, idem.ReviewMaybeTwice, op.Review)
}

// doWhileForcedFailed drives key "k" with Do, at the default budget, on a
// Client whose submit is met, once on the wire, by an operator's Resolve
// as failed (idem resolve -force) with reason.
func doWhileForcedFailed(t testing.TB, e *env, reason string) (*idem.Result, error) {
	t.Helper()
	tr := &confirmOnSend{base: e.srv.Client().Transport}
	c, err := idem.New(e.replica(), append(e.baseOpts(),
		idem.WithMaxAttempts(idem.DefaultMaxAttempts), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	tr.confirm = func() error {
		_, err := c.Resolve(context.Background(), "", "k", idem.Resolution{State: idem.StateFailed, Reason: reason, By: "ops", Force: true})
		return err
	}
	op, err := c.Lookup(e.ctx, "", "k")
	require.NoError(t, err)
	res, err := c.Do(e.ctx, op)
	require.NoError(t, tr.err, "Resolve() while the resend was on the wire")
	return res, err
}

// An operator forces an operation failed (its answer was lost, and the
// dashboard showed nothing yet) while the caller's Do resends it, and the
// server answers that the key's first request is still executing: Stripe's
// 409 idempotency_error for a key whose request is in progress
// (https://docs.stripe.com/error-low-level#idempotency). That answer
// settles nothing, so it was dropped without a trace and the call
// returned ErrFailed: a checkout that retries under a new key charges
// twice once the first request completes. It contradicts the failure as
// a 2xx would: recorded beside the resolution, flagged, and the call told
// ErrNeedsReview.
func TestForcedFailureWhileServerStillExecuting(t *testing.T) {
	counts := newSettleCounts()
	// The setup client's one attempt, answered 502 by a gateway after the
	// server took the request, leaves the operation unknown, as a caller
	// whose deadline passed would; the call under test is a Do with the
	// default budget.
	e := newEnv(t, noResultEndpoint(), script(step{forward: true, status: http.StatusBadGateway}),
		clientOpts(idem.WithMaxAttempts(1)), counts.options())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	res, err := doWhileForcedFailed(t, e, "not in the dashboard")

	requireContradicted(t, res, err, idem.ReviewConfirmConflict)
	require.Len(t, e.submits("k"), 2, "the first and the resend")
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
	late := requireAnswerKeptBeside(t, e, counts, 1)
	require.Equal(t, idem.StateProcessing, late.State)
	require.Equal(t, http.StatusConflict, late.StatusCode)
}

// settledWhileCommitLost is a Store whose first Update once armed is not
// applied but answered journal.ErrMaybeCommitted, as a PostgreSQL
// journal's is when the connection breaks before the COMMIT is processed
// (a failover); settle runs in between, as a webhook's Confirm retried
// by the provider commits once the database is back, before the drive's
// read-back.
type settledWhileCommitLost struct {
	*journal.Store
	settle func() error

	mu         sync.Mutex
	armed, cut bool
	settleErr  error
}

func (s *settledWhileCommitLost) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

func (s *settledWhileCommitLost) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	s.mu.Lock()
	cut := s.armed && !s.cut
	s.cut = s.cut || cut
	s.mu.Unlock()
	if !cut {
		return s.Store.Update(ctx, scope, key, fn)
	}
	err := s.settle()
	s.mu.Lock()
	s.settleErr = err
	s.mu.Unlock()
	return nil, fmt.Errorf("pgjournal: update %q: %w: unexpected EOF", key, journal.ErrMaybeCommitted)
}

// The answer's own journal write is lost with PostgreSQL failing over
// (its COMMIT never processed), and before the drive reads the record
// back, Adyen's AUTHORISATION success=false notification for another
// payment carrying our merchantReference (the key) settles it failed
// through Confirm. The read-back found a record that was not its write
// and gave up: the call returned ErrUnknownOutcome, the authorisation the
// server answered was dropped without a trace, and the journal said
// "failed", unflagged, so the next Do returned ErrFailed and a checkout
// retried under a new key: a second authorisation.
func TestAnswerKeptWhenSettledDuringLostCommit(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, counts.options())
	require.NoError(t, e.client.Close())
	s := &settledWhileCommitLost{Store: e.store}
	base := e.srv.Client().Transport
	hc := &http.Client{Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if r.Method != http.MethodGet {
			s.arm() // the answer is back: its journal write is next
		}
		return resp, err
	})}
	c, err := idem.New(s, append(e.baseOpts(), idem.WithHTTPClient(hc))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s.settle = func() error { return refusedElsewhere(c) }

	res, err := c.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.NoError(t, s.settleErr, "Confirm() while the write's fate was unknown")
	requireContradicted(t, res, err, idem.ReviewConfirmConflict)
	require.Equal(t, http.StatusCreated, res.StatusCode, "the server's answer")
	require.Len(t, e.submits("k"), 1)
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "authorisations")
	late := requireAnswerKeptBeside(t, e, counts, 2)
	require.Equal(t, idem.StateSucceeded, late.State)
	require.Equal(t, "ord_000001", late.ResourceID)

	op, err := c.Lookup(e.ctx, "", "k")
	require.NoError(t, err)
	res, err = c.Do(e.ctx, op)
	requireContradicted(t, res, err, idem.ReviewConfirmConflict)
	require.Len(t, e.submits("k"), 1, "nothing more sent")
}

// An operator forces failed an operation whose first request never left
// (the dial was refused: nothing can have executed), while the
// customer's retry of the same checkout resends it through Do. That
// resend executes the order for the first time, and its answer is lost.
// The resolution could not know of a request sent while it was made: the
// call used to return ErrFailed, the journal saying "failed" unflagged
// over an order the server holds, and a checkout that sees ErrFailed
// retries under a new key: a second order. A resend that may have
// executed and whose answer tells nothing contradicts the failure.
func TestForcedFailureWhileResendAnswerLost(t *testing.T) {
	counts := newSettleCounts()
	// The setup client's one attempt, refused at dial, leaves the
	// operation pending, never sent; the call under test is a Do with the
	// default budget.
	e := newEnv(t, script(step{err: dialRefused}), clientOpts(idem.WithMaxAttempts(1)), counts.options())
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Empty(t, e.submits("k"), "nothing reached the server")
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))

	res, err := doWhileForcedFailed(t, e, "never sent; customer gave up")

	requireContradicted(t, res, err, idem.ReviewConfirmConflict)
	require.Len(t, e.submits("k"), 1, "the resend, and nothing after the resolution")
	require.Zero(t, e.queries("k"), "no query after the resolution")
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
	late := requireAnswerKeptBeside(t, e, counts, 1)
	require.Equal(t, idem.StateProcessing, late.State, "may have executed")
	require.Zero(t, late.StatusCode, "no answer")
}

// Checkout.com answers a pending payment with 202 and replays it for the
// Cko-Idempotency-Key; a resend to a server whose idempotency store lost
// the key made a second payment (ReviewMadeTwice). The provider's webhook
// then says the first was declined (payment_declined), which settles the
// operation failed, the flag kept. The second payment still stands: the
// call returned ErrFailed, and a checkout that retries under a new key
// pays a third time.
func TestFailureOfOnePaymentMadeTwiceIsNotAFailure(t *testing.T) {
	s := newAsyncOrders(t)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, s.srv, clock)
	s.submit(t, c)
	s.forget()
	resumeThrice(t, c, clock)
	_, err := c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateFailed, ResourceID: "ord_1",
		Source: "checkout", EventID: "evt_declined", Reason: "payment_declined"})
	require.NoError(t, err)
	s.mu.Lock()
	posts := len(s.posts)
	s.mu.Unlock()

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, op.State)
	require.Equal(t, idem.ReviewMadeTwice, op.Review, "kept until Resolve")
	res, err := c.Do(t.Context(), op)
	requireContradicted(t, res, err, idem.ReviewMadeTwice)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.posts, posts, "nothing sent")
	require.Equal(t, 2, s.orders, "orders")
}
