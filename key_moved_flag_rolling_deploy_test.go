package idem_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// keyMovedDeploy is one journal file opened in turn by the releases of a
// rolling deploy that renames the key's header (twoHeaderKey's server).
type keyMovedDeploy struct {
	t     *testing.T
	ctx   context.Context
	clock *idemtest.Clock
	srv   *bodyKeyServer
	path  string
	req   idem.Request
}

func newKeyMovedDeploy(t *testing.T) *keyMovedDeploy {
	clock := idemtest.NewClock(epoch)
	s := newKeyReadingServer(t, clock, twoHeaderKey)
	return &keyMovedDeploy{t: t, ctx: context.Background(), clock: clock, srv: s,
		path: filepath.Join(t.TempDir(), "idem.journal"),
		req:  idem.Request{Key: "ord-7f3a9c", URL: s.srv.URL + "/v1/orders", Body: []byte(`{"amount":100,"currency":"EUR"}`)}}
}

// release runs fn with a Client on the journal: release 1's settings
// (Idempotency-Key), or release 2's with renamed.
func (e *keyMovedDeploy) release(renamed bool, fn func(*journal.Store, *idem.Client)) {
	opts := []idem.Option{idem.WithHTTPClient(e.srv.srv.Client()), idem.WithClock(e.clock)}
	if renamed {
		opts = append(opts, idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare))
	}
	st, err := journal.Open(e.path)
	require.NoError(e.t, err)
	c, err := idem.New(st, opts...)
	require.NoError(e.t, err)
	fn(st, c)
	require.NoError(e.t, c.Close())
	require.NoError(e.t, st.Close())
}

func (e *keyMovedDeploy) resume(renamed bool) {
	e.release(renamed, func(_ *journal.Store, c *idem.Client) {
		_, err := c.Resume(e.ctx)
		require.NoError(e.t, err)
	})
}

// run runs release 1's Run until done says the operation is visited.
func (e *keyMovedDeploy) run(done func(*idem.Operation) bool) {
	e.release(false, func(_ *journal.Store, c *idem.Client) {
		ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
		defer cancel()
		ran := make(chan struct{})
		go func() { _ = c.Run(ctx); close(ran) }()
		require.Eventually(e.t, func() bool {
			op, err := c.Lookup(e.ctx, "", e.req.Key)
			return err == nil && done(op)
		}, 15*time.Second, time.Millisecond)
		cancel()
		<-ran
	})
}

func (e *keyMovedDeploy) record() *journal.Record {
	var rec *journal.Record
	e.release(false, func(st *journal.Store, _ *idem.Client) {
		var err error
		rec, err = st.Get(e.ctx, idem.DefaultScope, e.req.Key)
		require.NoError(e.t, err)
	})
	return rec
}

// ReviewKeyMoved speaks of the Client that visited the operation, not
// of the operation: a replica on release 2's settings (the key's header
// renamed) flags release 1's operation and sends nothing, and release
// 1's Resume and Run, held by the flag to queries, never sent it either:
// an outbox's intent (PrepareIn, which no caller Does) 0 orders, open
// for good; one whose answers were lost, with no result endpoint to
// query, unknown for good. A Client on the journaled settings now drives
// it as unflagged: 1 order, settled succeeded, the flag cleared.
func TestKeyMovedFlagClientOnJournaledSettingsDrivesIt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(e *keyMovedDeploy)
	}{
		{"outbox intent never sent", func(e *keyMovedDeploy) {
			e.srv.answer()
			e.release(false, func(st *journal.Store, c *idem.Client) {
				_, err := c.PrepareIn(e.ctx, e.req, st.Create)
				require.NoError(t, err)
			})
		}},
		{"answers lost, no result endpoint", func(e *keyMovedDeploy) {
			e.release(false, func(_ *journal.Store, c *idem.Client) {
				_, err := c.Submit(e.ctx, e.req)
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			})
			e.srv.answer()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newKeyMovedDeploy(t)
			tc.start(e)
			orders, posts := e.srv.counts()
			e.clock.Advance(time.Minute)

			e.resume(true)
			rec := e.record()
			require.Equal(t, idem.ReviewKeyMoved, rec.Review)
			o, p := e.srv.counts()
			require.Equal(t, [2]int{orders, posts}, [2]int{o, p}, "release 2 sent it")

			e.clock.Advance(time.Minute)
			e.resume(false)
			rec = e.record()
			o, _ = e.srv.counts()
			require.Equal(t, 1, o, "orders")
			require.Equal(t, journal.StateSucceeded, rec.State)
			require.Equal(t, "", rec.Review)
		})
	}
}

// A flag the operation earned stays when a Client on other settings
// visits it: ReviewKeyMoved replacing it, a Client on the journaled
// settings would drive it as unflagged, sending an order whose
// reconciliation deadline passed days ago.
func TestKeyMovedFlagKeepsDeadlinePassed(t *testing.T) {
	e := newKeyMovedDeploy(t)
	e.srv.answer()
	e.release(false, func(_ *journal.Store, c *idem.Client) {
		_, err := c.Prepare(e.ctx, e.req)
		require.NoError(t, err)
	})
	e.clock.Advance(idem.DefaultReconcileDeadline + time.Hour)
	e.run(func(op *idem.Operation) bool { return op.Review != "" })
	require.Equal(t, idem.ReviewDeadlinePassed, e.record().Review)

	e.resume(true)
	require.Equal(t, idem.ReviewDeadlinePassed, e.record().Review, "release 2's visit")
	e.resume(false)
	orders, posts := e.srv.counts()
	require.Equal(t, [2]int{0, 0}, [2]int{orders, posts}, "sent past its deadline")
	require.Equal(t, idem.ReviewDeadlinePassed, e.record().Review)
}

// Run on the journaled settings drives an operation flagged only
// ReviewKeyMoved as unflagged, deadline included: release 1's intent,
// visited by release 2 before its reconciliation deadline and by
// release 1's Run after it, is flagged ReviewDeadlinePassed, not sent.
func TestKeyMovedFlagRunPastDeadlineSendsNothing(t *testing.T) {
	e := newKeyMovedDeploy(t)
	e.srv.answer()
	e.release(false, func(_ *journal.Store, c *idem.Client) {
		_, err := c.Prepare(e.ctx, e.req)
		require.NoError(t, err)
	})
	e.clock.Advance(time.Hour)
	e.resume(true)
	require.Equal(t, idem.ReviewKeyMoved, e.record().Review)
	e.clock.Advance(idem.DefaultReconcileDeadline)
	e.run(func(op *idem.Operation) bool { return op.Review != idem.ReviewKeyMoved || op.State.Terminal() })
	orders, posts := e.srv.counts()
	require.Equal(t, [2]int{0, 0}, [2]int{orders, posts}, "sent past its deadline")
	require.Equal(t, idem.ReviewDeadlinePassed, e.record().Review)
}

// An intent nothing of ours ever sent, flagged ReviewKeyMoved by release
// 2's visit, is unknown like any flagged operation; a Stripe event
// carrying its key is another request's (as in
// TestConfirmOfAnIntentNeverSentPastTheDeadline). Confirm read only a
// pending record, or one flagged ReviewDeadlinePassed, as never sent:
// it settled this one succeeded with the other's PaymentIntent, clean.
// It is flagged ReviewKeyInUse as it settles.
func TestKeyMovedFlagNeverSentConfirmIsAnotherRequests(t *testing.T) {
	e := newKeyMovedDeploy(t)
	e.srv.answer()
	e.release(false, func(st *journal.Store, c *idem.Client) {
		_, err := c.PrepareIn(e.ctx, e.req, st.Create)
		require.NoError(t, err)
	})
	e.resume(true)
	require.Equal(t, idem.ReviewKeyMoved, e.record().Review)
	e.release(true, func(_ *journal.Store, c *idem.Client) {
		res, err := c.Confirm(e.ctx, "", e.req.Key, othersSuccess)
		require.NoError(t, err, "Confirm()")
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, idem.ReviewKeyInUse, res.Review, "nothing of ours executed: the event is another request's")
	})
	orders, posts := e.srv.counts()
	require.Equal(t, [2]int{0, 0}, [2]int{orders, posts})
}
