package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
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
	opts  []idem.Option // every release's, after the settings
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
	opts = append(opts, e.opts...)
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

// prepare journals the order under release 1's settings, never sent:
// with PrepareIn, as an outbox's PrepareTx does (due at once), or with
// Prepare; the server answers from now on.
func (e *keyMovedDeploy) prepare(outbox bool) {
	e.srv.answer()
	e.release(false, func(st *journal.Store, c *idem.Client) {
		var err error
		if outbox {
			_, err = c.PrepareIn(e.ctx, e.req, st.Create)
		} else {
			_, err = c.Prepare(e.ctx, e.req)
		}
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
		{"outbox intent never sent", func(e *keyMovedDeploy) { e.prepare(true) }},
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
	e.prepare(false)
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
	e.prepare(false)
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
	e.prepare(true)
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

// An endpoint that ignores the key (keyIgnoringCharges, modelled on
// Solidgate's) charged every send of release 1's payment, each answer
// lost. Release 2, the key's header renamed, learns from another
// payment's answer that the endpoint ignores keys, then visits it: it
// flagged it ReviewKeyMoved, where ReviewKeyIgnored tells that several
// sends may each have charged, and the webhook event for one payment
// then settled it clean, the others' charges forgotten. ReviewKeyIgnored
// comes first: the settlement keeps ReviewMaybeTwice.
func TestKeyMovedFlagYieldsToKeyIgnored(t *testing.T) {
	// Release 2's Resume at start-up visits the payment before any
	// answer has taught it the endpoint, or after.
	for _, resumeFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "learnt first", true: "resumed first"}[resumeFirst], func(t *testing.T) {
			keyMovedFlagYieldsToKeyIgnored(t, resumeFirst)
		})
	}
}

func keyMovedFlagYieldsToKeyIgnored(t *testing.T, resumeFirst bool) {
	ctx := context.Background()
	s, lost := newLostThenIgnoredCreated(t)
	clock := idemtest.NewClock(epoch)
	path := filepath.Join(t.TempDir(), "idem.journal")
	url := s.srv.URL + "/api/v1/charge"
	var sentK atomic.Int32 // POSTs of k, under either header
	hc := s.srv.Client()
	base := hc.Transport
	hc.Transport = rtFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && (r.Header.Get("Idempotency-Key") == "k" || r.Header.Get("Paypal-Request-Id") == "k") {
			sentK.Add(1)
		}
		return base.RoundTrip(r)
	})
	release := func(opts []idem.Option, fn func(*idem.Client)) {
		st, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(st, append([]idem.Option{idem.WithHTTPClient(hc), idem.WithClock(clock)}, opts...)...)
		require.NoError(t, err)
		fn(c)
		require.NoError(t, c.Close())
		require.NoError(t, st.Close())
	}
	renamed := []idem.Option{idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare)}

	release(nil, func(c *idem.Client) {
		_, err := c.Submit(ctx, idem.Request{Key: "k", URL: url, Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	})
	sends := sentK.Load()
	require.Greater(t, sends, int32(1), "release 1's sends, each a charge")
	lost.Store(false)
	clock.Advance(time.Minute)

	release(renamed, func(c *idem.Client) {
		if resumeFirst {
			_, err := c.Resume(ctx)
			require.NoError(t, err)
		}
		_, err := c.Submit(ctx, idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5,"order_id":"o-0"}`)})
		require.NoError(t, err)
		if !resumeFirst {
			_, err = c.Resume(ctx)
			require.NoError(t, err)
			op, err := c.Lookup(ctx, "", "k")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewKeyIgnored, op.Review)
		}
		res, err := c.Confirm(ctx, "", "k", cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok"))
		require.NoError(t, err, "Confirm()")
		require.Equal(t, idem.ReviewMaybeTwice, res.Review, "the other sends may have charged")
	})
	require.Equal(t, sends, sentK.Load(), "k sent again")
}
