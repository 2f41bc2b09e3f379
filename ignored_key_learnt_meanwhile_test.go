package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// heldWriteStore holds the first Update of key once armed, before it
// reaches the journal (so that other keys' writes go on), until release
// is closed: the window between a drive's look at shared state and the
// write that precedes its send, which a loaded disk's fsync makes as
// long.
type heldWriteStore struct {
	*journal.Store
	key     string
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

// doEnd is how a Do run by doAsync ended.
type doEnd struct {
	res *idem.Result
	err error
}

// doAsync runs c.Do on key on its own goroutine; awaitDo takes its end.
func doAsync(t testing.TB, c *idem.Client, key string) <-chan doEnd {
	done := make(chan doEnd, 1)
	go func() {
		res, err := c.Do(t.Context(), &idem.Operation{Key: key})
		done <- doEnd{res, err}
	}()
	return done
}

// awaitDo is the end of a Do that doAsync started: bounded by two attempt
// timeouts, far more than the calls of these tests take.
func awaitDo(t testing.TB, done <-chan doEnd) doEnd {
	t.Helper()
	select {
	case got := <-done:
		return got
	case <-time.After(2 * idem.DefaultAttemptTimeout):
		t.Fatal("Do did not end")
		return doEnd{}
	}
}

func newHeldWriteStore(t testing.TB, key string) *heldWriteStore {
	t.Helper()
	store, err := journal.Open(t.TempDir() + "/idem.journal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return &heldWriteStore{Store: store, key: key, reached: make(chan struct{}), release: make(chan struct{})}
}

func (s *heldWriteStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	if key == s.key && s.armed.CompareAndSwap(true, false) {
		close(s.reached)
		<-s.release
	}
	return s.Store.Update(ctx, scope, key, fn)
}

// Solidgate's endpoints differ in whether they de-duplicate by the key,
// and an answer says which: "Idempotency-Status: ignored"
// (https://api-docs.solidgate.com/api/v2/idempotent-requests). A payment
// whose answer was lost may have charged; the caller's Do resends it, the
// endpoint not known yet to ignore the key. While that resend's attempt
// is journaled (held here, as a slow fsync holds it), another payment's
// answer says the endpoint ignores the key: the resend would charge
// again. The drive read that after its journal write, only to keep
// net/http from resending, and sent all the same: two charges. Now it
// is flagged ReviewKeyIgnored, its attempt closed as never sent, and
// nothing more goes. Default settings but the clock.
func TestIgnoredKeyLearntWhileTheResendIsJournaledIsNotSent(t *testing.T) {
	s := newIgnoringAPI(t)
	store := newHeldWriteStore(t, "a")
	c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	charge := s.srv.URL + "/api/v1/charge"

	s.submitLost(t, c, "a", charge, `{"amount":100}`)

	store.armed.Store(true)
	done := doAsync(t, c, "a")
	select {
	case <-store.reached:
	case <-time.After(idem.DefaultAttemptTimeout):
		t.Fatal("Do journaled no resend")
	}
	_, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err, "the other payment, whose answer says the key is ignored")
	close(store.release)
	got := awaitDo(t, done)

	require.ErrorIs(t, got.err, idem.ErrNeedsReview)
	require.ErrorIs(t, got.err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.ReviewKeyIgnored, got.res.Review)
	s.requireSeen(t, "a", "k2")
	rec, err := store.Get(t.Context(), idem.DefaultScope, "a")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewKeyIgnored, rec.Review)
	require.Len(t, rec.Attempts, 2)
	require.True(t, rec.Attempts[0].Wrote, "the first, whose answer was lost, may have charged")
	require.True(t, rec.Attempts[1].Done, "the resend held back is closed")
	require.False(t, rec.Attempts[1].Wrote, "the resend held back was never sent")

	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	s.requireSeen(t, "a", "k2")
}
