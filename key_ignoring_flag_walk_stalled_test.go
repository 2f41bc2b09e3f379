package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// stalledApplier is the bbolt journal with its applier stalled (an fsync
// on a dying disk, modelled): its journaling of an endpoint never
// commits, whatever its context says, and once armed its walk of the open
// operations waits behind it, as bbolt's does (a scan applies the log
// first, under the applier's lock). Writes to the log go on.
type stalledApplier struct {
	*journal.Store
	armed   atomic.Bool
	release chan struct{} // closed: the applier goes on
}

func (s *stalledApplier) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	<-s.release
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

func (s *stalledApplier) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	if s.armed.Load() {
		<-s.release
	}
	return s.Store.ForEachOpen(ctx, fn)
}

// The Solidgate payment endpoint that does not de-duplicate by the key
// (https://api-docs.solidgate.com/api/v2/idempotent-requests: "A value
// of ignored means the endpoint does not") charged k1, whose caller gave
// up before the answer came (k1 open, unflagged), then answered k2 201
// marked ignored. Its journaling stalled, the endpoint's other open
// operations are flagged before k2's outcome is committed (keepLearnt);
// that walk waited for the stalled applier with no bound, and Submit(k2)
// did not return until the disk did. It is bounded as the save is: k2 is
// left open, flagged ReviewKeyIgnored, its flag the endpoint's trace for
// a process killed before the walk ends, never committed unflagged with
// nothing journaled.
func TestKeyIgnoringFlagWalkStalledIsBounded(t *testing.T) {
	var store *stalledApplier
	ctx, s, open := firstAnswerLost(t, func(js *journal.Store) idem.Store {
		store = &stalledApplier{Store: js, release: make(chan struct{})}
		return store
	}, ignoredCreated)
	c, js := open()
	released := false
	release := func() {
		if !released {
			released = true
			close(store.release)
		}
	}
	t.Cleanup(release) // before open's Close
	charge := s.srv.URL + "/api/v1/charge"

	submitK1Lost(ctx, t, c, charge)
	store.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":200}`)})
		done <- err
	}()
	// The save's 10 s bound, then the walk's, with room to spare.
	var err error
	select {
	case err = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("Submit(k2) held by the walk of the endpoint's open operations")
	}
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k2)")
	require.Equal(t, []string{"k1", "k2"}, s.charged(), "charges, by the key each request carried")
	requireOpenKeyIgnored(t, c, "k2")

	release()
	require.NoError(t, c.Close())
	kept, err := js.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + charge}, kept, "journaled once the applier went on")
}
