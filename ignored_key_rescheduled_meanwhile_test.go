package idem_test

import (
	"context"
	"fmt"
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
	s := newIgnoringAPI(t)
	path := filepath.Join(t.TempDir(), "idem.journal")
	charge := s.srv.URL + "/api/v1/charge"

	// The earlier process, its clock half an hour fast.
	fast, err := journal.Open(path)
	require.NoError(t, err)
	c, err := idem.New(fast, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch.Add(30*time.Minute))))
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), idem.Request{Key: "k0", URL: charge, Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	s.loseNext()
	res, err := c.Submit(t.Context(), idem.Request{Key: "x", URL: charge, Body: []byte(`{"amount":5}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	// More open operations than a page of the walk (256), due before the
	// flagged one and not yet sent, to another endpoint.
	for i := range 300 {
		_, err := c.Prepare(t.Context(), idem.Request{Key: fmt.Sprintf("r%03d", i), URL: s.srv.URL + "/api/v1/refund", Body: []byte(`{"amount":1}`)})
		require.NoError(t, err)
	}
	require.NoError(t, c.Close())
	require.NoError(t, fast.Close())
	s.requireSeen(t, "k0", "x")

	// The restart, the clock put right.
	inner, err := journal.Open(path)
	require.NoError(t, err)
	store := &heldScanStore{Store: inner, reached: make(chan struct{}), release: make(chan struct{}), claims: make(chan struct{})}
	c, err = idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)
	// Whatever ends the test, nothing stays held: a Do held in its walk
	// would hold Close, and Run behind it.
	release, openClaims := sync.OnceFunc(func() { close(store.release) }), sync.OnceFunc(func() { close(store.claims) })
	t.Cleanup(func() {
		release()
		openClaims()
		_ = c.Close()
		_ = inner.Close()
	})
	s.submitLost(t, c, "y", charge, `{"amount":100}`)

	store.armed.Store(true)
	done := doAsync(t, c, "y")
	select {
	case <-store.reached:
	case <-time.After(idem.DefaultAttemptTimeout):
		t.Fatal("Do's resend did not read the journal's open operations")
	}
	runCtx, stopRun := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = c.Run(runCtx); close(ran) }()
	defer func() {
		release()
		openClaims()
		stopRun()
		<-ran
	}()
	require.Eventually(t, func() bool {
		rec, err := inner.Get(t.Context(), idem.DefaultScope, "x")
		return err == nil && !rec.NextDue.After(epoch)
	}, 15*time.Second, time.Millisecond, "Run's first pass makes the flagged operation due now")
	release()
	got := awaitDo(t, done)
	openClaims()

	s.requireSeen(t, "k0", "x", "y")
	require.ErrorIs(t, got.err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, got.res.Review)
	rec, err := inner.Get(t.Context(), idem.DefaultScope, "y")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Len(t, rec.Attempts, 1, "the payment whose answer was lost is not sent again")
}
