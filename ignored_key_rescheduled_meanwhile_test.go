package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// heldScanStore holds, once armed, the first ForEachOpen at its first
// record (after it has read its first page of the open index, as a walk
// that a slow fsync or a big page of records keeps long) until release
// is closed; and every ClaimDue until claims is closed, so that Run's
// visits, which would teach the Client what the walk missed, come after
// the call under test.
type heldScanStore struct {
	*journal.Store
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
	claims  chan struct{}
}

func (s *heldScanStore) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Store.ForEachOpen(ctx, fn)
	}
	first := true
	return s.Store.ForEachOpen(ctx, func(r *journal.Record) error {
		if first {
			first = false
			close(s.reached)
			<-s.release
		}
		return fn(r)
	})
}

func (s *heldScanStore) ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]journal.Claimed, error) {
	select {
	case <-s.claims:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.ClaimDue(ctx, owner, now, expires, limit)
}

// walkRace is a restarted process whose caller's Do resends a payment
// (y) whose answer was lost, held in the first resend's walk of the open
// operations (after its first page), while the journal holds another
// payment to the endpoint (x), flagged for ignoring the key by an
// earlier process whose clock ran half an hour fast (of a release that
// journaled no endpoints: storeOnly), and due after more
// open operations than a page of the walk holds.
type walkRace struct {
	s          *ignoringAPI
	c          *idem.Client
	store      *heldScanStore
	done       <-chan doEnd // y's Do
	release    func()       // lets the walk go on
	openClaims func()       // lets Run claim
}

// newWalkRace builds it; resultURL is x's result endpoint, if any.
func newWalkRace(t *testing.T, resultURL string) *walkRace {
	t.Helper()
	w := &walkRace{s: newIgnoringAPI(t)}
	path := filepath.Join(t.TempDir(), "idem.journal")
	charge := w.s.srv.URL + "/api/v1/charge"

	fast, err := journal.Open(path)
	require.NoError(t, err)
	// A release before the endpoints were journaled: only the flag tells.
	c, err := idem.New(storeOnly{fast}, idem.WithHTTPClient(w.s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch.Add(30*time.Minute))))
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), idem.Request{Key: "k0", URL: charge, Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	w.s.loseNext()
	res, err := c.Submit(t.Context(), idem.Request{Key: "x", URL: charge, ResultURL: resultURL, Body: []byte(`{"amount":5}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	// Not yet sent, to another endpoint: due at once by that clock, half
	// an hour on by the one put right.
	for i := range 300 {
		_, err := c.Prepare(t.Context(), idem.Request{Key: fmt.Sprintf("r%03d", i), URL: w.s.srv.URL + "/api/v1/refund", Body: []byte(`{"amount":1}`)})
		require.NoError(t, err)
	}
	require.NoError(t, c.Close())
	require.NoError(t, fast.Close())
	w.s.requireSeen(t, "k0", "x")

	// The restart, the clock put right.
	inner, err := journal.Open(path)
	require.NoError(t, err)
	w.store = &heldScanStore{Store: inner, reached: make(chan struct{}), release: make(chan struct{}), claims: make(chan struct{})}
	w.c, err = idem.New(w.store, idem.WithHTTPClient(w.s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)
	// Whatever ends the test, nothing stays held: a Do held in its walk
	// would hold Close, and Run behind it.
	w.release = sync.OnceFunc(func() { close(w.store.release) })
	w.openClaims = sync.OnceFunc(func() { close(w.store.claims) })
	t.Cleanup(func() {
		w.release()
		w.openClaims()
		_ = w.c.Close()
		_ = inner.Close()
	})
	// y's first send, by a Client on the journal that could not read its
	// flagged operations (ForEachOpen failed): sent once, its answer lost,
	// not flagged, as one sent before anything said the endpoint ignores
	// the key. w.c has read nothing yet: its Do of y is the first resend.
	other, err := idem.New(&damagedOpenIndex{Store: inner}, idem.WithHTTPClient(w.s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)
	w.s.submitLost(t, other, "y", charge, `{"amount":100}`)
	require.NoError(t, other.Close())

	w.store.armed.Store(true)
	w.done = doAsync(t, w.c, "y")
	select {
	case <-w.store.reached:
	case <-time.After(idem.DefaultAttemptTimeout):
		t.Fatal("Do's resend did not read the journal's open operations")
	}
	return w
}

// requireNotResent lets the walk go on and asserts that y was not sent
// again: flagged for the endpoint, as the walk would have had it.
func (w *walkRace) requireNotResent(t *testing.T) {
	t.Helper()
	w.release()
	got := awaitDo(t, w.done)
	w.s.requireSeen(t, "k0", "x", "y")
	require.ErrorIs(t, got.err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, got.res.Review)
	rec, err := w.store.Get(t.Context(), idem.DefaultScope, "y")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Len(t, rec.Attempts, 1, "the payment whose answer was lost is not sent again")
}

// Solidgate's endpoints differ in whether they de-duplicate by the key,
// and an answer says which: "Idempotency-Status: ignored"
// (https://api-docs.solidgate.com/api/v2/idempotent-requests). A process
// whose clock ran half an hour fast flagged a payment to such an
// endpoint for review (its answer was lost), due again a day later by
// that clock; restarted with the clock put right, Run's first pass makes
// it due now (reschedule: too far ahead for any schedule). A caller's Do
// retrying another payment to the endpoint, whose answer was lost too,
// reads the journal's flagged operations first (the first resend's
// walk); the walk reads the open index a page at a time, in NextDue
// order, and the flagged one, moved ahead of where the walk stood, was
// never read: the endpoint was taken for one that de-duplicates, the
// walk counted as done, and the payment was charged twice. The
// reschedule read the flagged operation before it moved it: the Client
// learns the endpoint from it there. Default settings but the clock.
func TestIgnoredKeyFlaggedOperationRescheduledDuringTheFirstResendsWalk(t *testing.T) {
	w := newWalkRace(t, "")
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = w.c.Run(ctx); close(ran) }()
	defer func() {
		w.release()
		w.openClaims()
		stop()
		<-ran
	}()
	require.Eventually(t, func() bool {
		rec, err := w.store.Get(t.Context(), idem.DefaultScope, "x")
		return err == nil && !rec.NextDue.After(epoch)
	}, 15*time.Second, time.Millisecond, "Run's first pass makes the flagged operation due now")
	w.requireNotResent(t)
}

// As above, the flagged payment moved by its own drive: a caller's Do of
// it, while its result endpoint is down (503), is flagged again and due
// on the reconciler's schedule, ahead of where the other payment's walk
// stood (it was due a day later by the earlier process's clock). The
// drive read it when it claimed it: the Client learns the endpoint from
// it there.
func TestIgnoredKeyFlaggedOperationMovedByItsDriveDuringTheFirstResendsWalk(t *testing.T) {
	var resultStatus atomic.Int32
	resultStatus.Store(http.StatusNotFound) // found nothing: rechecked a day later
	results := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(resultStatus.Load()))
		_, _ = io.WriteString(w, `{"error":"not available"}`)
	}))
	t.Cleanup(results.Close)
	w := newWalkRace(t, results.URL+"/x")

	resultStatus.Store(http.StatusServiceUnavailable)
	_, err := w.c.Do(t.Context(), &idem.Operation{Key: "x"})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	rec, err := w.store.Get(t.Context(), idem.DefaultScope, "x")
	require.NoError(t, err)
	require.True(t, rec.NextDue.Before(epoch.Add(30*time.Minute)), "the flagged payment's NextDue = %s: due ahead of the walk's place", rec.NextDue)
	w.requireNotResent(t)
}

// The first resend's walk of the open operations may be long (a big
// backlog after an outage, a slow journal): a caller whose own resend
// waits behind it gets its call back when its context ends, where it
// waited for the walk whatever its deadline, the walk itself deaf to
// cancellation. Nothing of its payment is sent meanwhile.
func TestIgnoredKeyWalkWaitEndsWithTheCallersContext(t *testing.T) {
	w := newWalkRace(t, "")
	w.s.submitLost(t, w.c, "z", w.s.srv.URL+"/api/v1/charge", `{"amount":300}`)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := w.c.Do(ctx, &idem.Operation{Key: "z"})
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(idem.DefaultAttemptTimeout):
		t.Fatal("Do waited for another call's walk past its own deadline")
	}
	rec, err := w.store.Get(t.Context(), idem.DefaultScope, "z")
	require.NoError(t, err)
	require.Len(t, rec.Attempts, 1, "the payment whose answer was lost is not sent again")
	w.release()
	awaitDo(t, w.done)
}
