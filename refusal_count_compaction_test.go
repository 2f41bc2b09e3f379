package idem_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// The refusals that leave an operation for a person are counted through
// its journaled attempts, and the history of an operation reconciled for
// long is cut to its first and latest entries (64): a refusal in the
// middle must still count, across a compaction of the journal file and
// reopens, or the operation is resent past the third refusal. Refusals
// after a send that may have executed at submits 2, 80 and 150, waits
// between: flagged ReviewRefusedAfterSend at the third, no submit after
// it. DESIGN.md: never a failure for what may have executed;
// refusedAfterMaybeSent: left for a person once it persists.
func TestRefusalsCountAcrossCompaction(t *testing.T) {
	const third = 150
	clock := idemtest.NewClock(epoch)
	// A fleet whose replicas disagree about the key: the refusals far
	// apart in a long history of the in-progress 409's waits.
	s := newStuckServer(t, clock, "")
	s.refuse = map[int]bool{2: true, 80: true, third: true}
	s.window = idem.KeyRetentionStripe
	path := filepath.Join(t.TempDir(), "idem.journal")
	var store *journal.Store
	open := func() *idem.Client {
		var err error
		store, err = journal.Open(path)
		require.NoError(t, err)
		// The key window Stripe documents, whose 409 the server answers:
		// the default (20 minutes) would end the resends first.
		c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock), idem.WithKeyRetention(s.window))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = store.Close() })
		return c
	}
	c := open()
	_, err := c.Submit(t.Context(), idem.Request{Key: stuckKey, URL: s.srv.URL + "/v1/payments", Body: []byte(stuckRequest)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	compacted := false
	for pass := 1; pass <= 100; pass++ {
		clock.Advance(time.Minute)
		_, err := c.Resume(t.Context())
		require.NoError(t, err)
		op, err := c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
		require.NoError(t, err)
		require.NotEqualf(t, idem.StateFailed, op.State, "pass %d: may have executed", pass)
		if op.Review != "" {
			require.Equalf(t, idem.ReviewRefusedAfterSend, op.Review, "pass %d", pass)
			break
		}
		if !compacted && s.submits() > 100 {
			// The file compacted (idem compact) between passes; the
			// second refusal leaves the entries kept after submit 127.
			compacted = true
			require.NoError(t, c.Close())
			require.NoError(t, store.Close())
			_, err := journal.Compact(path)
			require.NoError(t, err)
			c = open()
		}
	}
	require.True(t, compacted, "never compacted")
	op, err := c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
	require.NoError(t, err)
	require.Equalf(t, idem.ReviewRefusedAfterSend, op.Review, "three refusals after a send (%d submits)", s.submits())
	require.Equal(t, third, s.submits(), "submits: none after the third refusal")

	// Nor after another reopen: the count is the journal's.
	clock.Advance(time.Hour)
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())
	c = open()
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, third, s.submits(), "submits after a reopen")
	s.requireOneOrder(t, stuckKey, stuckRequest)
}
