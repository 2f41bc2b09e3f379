package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeaderReturnsWithItsWrite: at the Store's default settings, a
// write whose round aborted on a row another transaction holds locked,
// and which is then made on its own at once, returns then: not only once
// the round's other writes, each waiting out the lock (5 s) in turn, are
// done. Its writer leads the round (its request is first), and a leader
// held by the others' waits passed its own bound on a healthy database.
func TestLeaderReturnsWithItsWrite(t *testing.T) {
	ctx := context.Background()
	forever := context.WithoutCancel(ctx)
	s := openStore(t)
	mustCreate(t, s, "free", "locked")
	locker := lockRows(t, s, "acct", "locked")
	g := holdRound(t, s)
	lead := timed(func() error {
		_, err := s.Update(forever, "acct", "free", reviewing("made"))
		return err
	})
	g.queued(1)
	const others = 3
	locked := make(chan error, others)
	for i := range others {
		go func() {
			_, err := s.Update(forever, "acct", "locked", reviewing("made"))
			locked <- err
		}()
		g.queued(i + 2)
	}
	close(g.open)
	require.NoError(t, <-g.done, "the gate's Update()")

	// The shared transaction waits out the lock (5 s), then "free" is
	// made alone at once; each "locked" write then waits 5 s in turn.
	const within = 10 * time.Second
	var c timedCall
	select {
	case c = <-lead:
	case <-time.After(within + 20*time.Second):
		t.Fatal("the leader's Update() never returned")
	}
	t.Logf("the leader's Update() returned after %v: %v", c.took.Round(time.Millisecond), c.err)
	require.NoError(t, c.err, "Update() of a row no one locks")
	require.Less(t, c.took, within, "the leader's Update(): held by the others' lock waits")
	locker.release()
	for range others {
		<-locked // made or not: the lock is gone now, or its wait ended
	}
	r, err := s.Get(ctx, "acct", "free")
	require.NoError(t, err)
	require.Equal(t, "made", r.Review)
}
