package idem_test

// Third adversarial review of the root package (the changes since 445b283:
// lifecycle, bound contexts, coalescing modes, backoff after an
// inconclusive query, query-escaped result templates). Each test failed on
// the code as reviewed, unless it says otherwise, and is kept as a
// regression test.

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// pollSignalClock is the env's manual clock, except that Run's poll (5 s)
// reports on polled and then blocks until ctx ends: Run makes exactly one
// pass, and the test knows when it is over.
type pollSignalClock struct {
	*idemtest.Clock
	polled chan struct{}
}

func (c *pollSignalClock) Sleep(ctx context.Context, d time.Duration) error {
	if d == 5*time.Second {
		select {
		case c.polled <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return c.Clock.Sleep(ctx, d)
}

// runOnePass runs the reconciler for exactly one pass over what is due.
func runOnePass(t *testing.T, e *env, clk *pollSignalClock) {
	t.Helper()
	rctx, stop := context.WithCancel(e.ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.client.Run(rctx) }()
	within(t, clk.polled, "Run's pass")
	stop()
	require.ErrorIs(t, within(t, ran, "Run"), context.Canceled)
}

// Backoff (DESIGN 5, doc.go: a 404 is followed by a resend "after a backoff
// wait"). The change exempted the reconciler after a 404 because "its
// visits are its backoff". That holds for the first resend of a visit, not
// for the next ones: against a server failing every submit (500 before
// commit, so the result endpoint answers 404), one visit went submit,
// query, submit, query, submit back to back until maxAttempts, with no
// wait and no retry budget (the reconciler never consults it). A fleet of
// reconcilers after an outage multiplied its load on the struggling server
// by maxAttempts. Now a visit resends at most once at once and reschedules.
func TestReview3ReconcilerVisitResendsOnceThenReschedules(t *testing.T) {
	clk := &pollSignalClock{polled: make(chan struct{}, 1)}
	// Visits hours apart: a server (and client) window of a day.
	e := newEnv(t, clientOpts(idem.WithClock(clk), idem.WithKeyRetention(idem.KeyRetentionStripe)))
	clk.Clock = e.clock

	// A prepared operation nobody drove: the reconciler sends it.
	_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k", Count: 100}))
	e.clock.Advance(time.Minute) // due
	runOnePass(t, e, clk)

	require.Len(t, e.submits("k"), 1, "one visit resent without any wait")
	require.Equal(t, 1, e.queries("k"))
	rec := e.record("k")
	require.Equal(t, journal.StateUnknown, rec.State)
	require.True(t, rec.NextDue.After(e.clock.Now()), "rescheduled, not due at once")
	require.Empty(t, e.clock.Sleeps(), "the reconciler never sleeps on an operation")

	// An operation that may have been sent: the visit asks first, resends
	// once after the 404, asks again, and reschedules.
	e.clock.Advance(2 * idem.DefaultReconcileMaxInterval)
	runOnePass(t, e, clk)
	require.Len(t, e.submits("k"), 2)
	require.Equal(t, 3, e.queries("k"))
	require.Zero(t, e.srv.Effects(scope, "k"))
	e.requireSameBytes("k")

	// Healthy again: the next visit settles it, once.
	e.srv.Reset() // no scripted faults left, nothing recorded
	e.clock.Advance(2 * idem.DefaultReconcileMaxInterval)
	runOnePass(t, e, clk)
	require.Equal(t, journal.StateSucceeded, e.record("k").State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// The result endpoint is "derived from the key". The query-escaping change
// looked at the first {key} only: in "/operations/{key}?echo={key}" the
// second one, in the query string, was path-escaped, so the server read
// "a b" for "a+b" and "a" plus another parameter for "a&x=y".
func TestReview3ResultTemplateEscapesEachKeyForItsPart(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithResultEndpoint("/operations/{key}?echo={key}&v=1")))
	for _, key := range []string{"a+b", "a&x=y", "ab+cd/ef==", "x?y#z", "p%2Fq"} {
		op, err := e.client.Prepare(e.ctx, e.req(key, `{}`))
		require.NoError(t, err)
		u, err := url.Parse(op.ResultURL)
		require.NoError(t, err)
		require.Equal(t, "/operations/"+key, u.Path, op.ResultURL)
		require.Equal(t, []string{key}, u.Query()["echo"], op.ResultURL)
		require.Equal(t, "1", u.Query().Get("v"), op.ResultURL)
		require.Empty(t, u.Fragment, op.ResultURL)
	}
}

// closeDuringCreateStore starts Close while Submit's Create is about to
// run, and lets Create go on only once Close has stopped the call.
type closeDuringCreateStore struct {
	idem.Store
	client func() *idem.Client
	closed chan error
}

func (s *closeDuringCreateStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	go func() { s.closed <- s.client().Close() }()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return s.Store.Create(ctx, rec)
}

// Close: "calls in flight ... return errors matching ErrClosed". A Submit
// that Close stopped just before its record was written got the journal's
// "context canceled", which matches neither ErrClosed nor anything else a
// caller can tell apart from a caller's own cancellation.
func TestReview3SubmitStoppedByCloseBeforeJournalingSaysClosed(t *testing.T) {
	e := newEnv(t)
	var c *idem.Client
	st := &closeDuringCreateStore{Store: e.store, client: func() *idem.Client { return c }, closed: make(chan error, 1)}
	c, err := idem.New(st, e.baseOpts()...)
	require.NoError(t, err)
	_, err = c.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrClosed)
	require.Contains(t, err.Error(), `key "k"`, "still names the key to retry with")
	require.NoError(t, within(t, st.closed, "Close"))
	require.Empty(t, e.srv.Requests())
}

// drainDuringScanStore starts Shutdown while Resume scans the journal.
type drainDuringScanStore struct {
	idem.Store
	client func() *idem.Client
	closed chan error
}

func (s *drainDuringScanStore) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.closed <- s.client().Shutdown(ctx)
	}()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return s.Store.ForEachOpen(ctx, fn)
}

// Resume is drained by Shutdown and says so with ErrClosed (as Run does,
// and as its visits do); drained during its scan of the journal it
// reported "idem: resume: context canceled" instead.
func TestReview3ResumeDrainedDuringScanSaysClosed(t *testing.T) {
	e := newEnv(t)
	var c *idem.Client
	st := &drainDuringScanStore{Store: e.store, client: func() *idem.Client { return c }, closed: make(chan error, 1)}
	c, err := idem.New(st, e.baseOpts()...)
	require.NoError(t, err)
	_, err = c.Resume(e.ctx)
	require.ErrorIs(t, err, idem.ErrClosed)
	require.NoError(t, within(t, st.closed, "Shutdown"))
}
