package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// TestQueuedWriteLeavesAtDeadline: at the Store's default settings, a
// write queued behind a round that does not end (one waiting out locked
// rows, round after round) returns when its own bound ends, not when the
// rounds ahead do: at its caller's deadline, or with a context that never
// ends (as the client makes its journal writes) at DefaultCallTimeout. It
// says that nothing was written (not journal.ErrMaybeCommitted), and
// indeed nothing is written, then or when the rounds ahead end.
func TestQueuedWriteLeavesAtDeadline(t *testing.T) {
	// Parallel: it waits out DefaultCallTimeout (30 s), idle meanwhile, on
	// a schema of its own.
	t.Parallel()
	ctx := context.Background()
	s := openStore(t)
	mustCreate(t, s, "short", "bounded")
	g := holdRound(t, s)
	start := func(ctx context.Context, key string) <-chan timedCall {
		return timed(func() error {
			_, err := s.Update(ctx, "acct", key, reviewing("queued"))
			return err
		})
	}
	const deadline = 300 * time.Millisecond
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	short := start(dctx, "short")
	g.queued(1)
	bounded := start(context.WithoutCancel(ctx), "bounded")
	g.queued(2)

	for _, w := range []struct {
		name  string
		done  <-chan timedCall
		bound time.Duration
	}{
		{"Update() with a deadline", short, deadline},
		{"Update() with a context that never ends", bounded, pgjournal.DefaultCallTimeout},
	} {
		var c timedCall
		select {
		case c = <-w.done:
		case <-time.After(w.bound + 5*time.Second):
			t.Fatalf("%s still queued %v after its bound (%v) ended", w.name, 5*time.Second, w.bound)
		}
		t.Logf("%s, after %v: %v", w.name, c.took.Round(time.Millisecond), c.err)
		require.ErrorIs(t, c.err, context.DeadlineExceeded, w.name)
		require.NotErrorIs(t, c.err, journal.ErrMaybeCommitted, "%s never left the queue: nothing can have committed", w.name)
		require.ErrorContains(t, c.err, "nothing was written", w.name)
		require.Less(t, c.took, w.bound+2*time.Second, "%s: how long it took", w.name)
	}
	require.Zero(t, pgjournal.CommitterQueued(s), "writes queued once both left")

	// The round ahead ends (its own write, held past its bound, fails).
	close(g.open)
	<-g.done
	for _, k := range []string{"short", "bounded"} {
		r, err := s.Get(ctx, "acct", k)
		require.NoError(t, err)
		require.Empty(t, r.Review, "%s: a write that left the queue was made", k)
	}
}

// timedCall is a call's error and how long it took.
type timedCall struct {
	err  error
	took time.Duration
}

// timed makes call on a goroutine of its own and sends its outcome.
func timed(call func() error) <-chan timedCall {
	done := make(chan timedCall, 1)
	go func() {
		begin := time.Now()
		err := call()
		done <- timedCall{err, time.Since(begin)}
	}()
	return done
}

// reviewing is an Update function that sets the record's Review.
func reviewing(text string) func(*journal.Record) error {
	return func(r *journal.Record) error {
		r.Review = text
		return nil
	}
}
