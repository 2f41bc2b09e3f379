package idem

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// sentRecord is an open record of key whose last attempt, a submit
// numbered n, started at start and may have executed.
func sentRecord(key string, n int, start time.Time) *journal.Record {
	rec := &journal.Record{Scope: "s", Key: key}
	for i := 1; i <= n; i++ {
		rec.Attempts = append(rec.Attempts, journal.Attempt{Number: i, Kind: journal.AttemptSubmit, Start: start, Done: true, Wrote: true})
	}
	return rec
}

// TestSendSightsCountFromFirstRead: a send another replica made is
// counted from this process's first read of it, and read again it keeps
// that time (counted from each read, Run's every visit would find the
// lag starting over, and an order never placed would never be resent);
// this process's own send counts from its start, and a later read of it
// does not move that; a newer send of another replica is counted afresh.
// A send stamped before born is counted from its first read too: by a
// clock behind ours, it may have been made since.
func TestSendSightsCountFromFirstRead(t *testing.T) {
	var s sendSights
	born := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	t0 := born.Add(time.Hour)
	keep := DefaultReconcileDeadline

	s.read(sentRecord("other", 1, t0.Add(-2*time.Minute)), t0, keep)
	s.read(sentRecord("other", 1, t0.Add(-2*time.Minute)), t0.Add(5*time.Minute), keep)
	require.Equal(t, t0, s.since(sentRecord("other", 1, t0.Add(-2*time.Minute))), "another replica's send, read twice")
	s.read(sentRecord("other", 3, t0), t0.Add(6*time.Minute), keep)
	require.Equal(t, t0.Add(6*time.Minute), s.since(sentRecord("other", 3, t0)), "its newer send")

	s.made(sentRecord("own", 2, t0), 1, t0.Add(time.Second), keep)
	s.read(sentRecord("own", 2, t0), t0.Add(10*time.Minute), keep)
	require.Equal(t, t0, s.since(sentRecord("own", 2, t0)), "this process's own send, read again")

	s.read(sentRecord("earlier", 1, born.Add(-time.Minute)), t0, keep)
	require.Equal(t, t0, s.since(sentRecord("earlier", 1, born.Add(-time.Minute))), "a send stamped before born")

	// A drive whose own sends were all refused leaves the send it read
	// counted from when it read it.
	refused := sentRecord("other", 3, t0)
	refused.Attempts = append(refused.Attempts, journal.Attempt{Number: 4, Kind: journal.AttemptSubmit, Start: t0.Add(7 * time.Minute), Done: true, Wrote: true, Refused: true})
	s.made(refused, 3, t0.Add(8*time.Minute), keep)
	require.Equal(t, t0.Add(6*time.Minute), s.since(refused), "after a drive whose sends were refused")

	s.forget("s", "own")
	require.True(t, s.since(sentRecord("own", 2, t0)).IsZero(), "forgotten once settled")
}

// TestSendSightsSweepsOldEntries: entries of operations another replica
// settled, which this process never visits again, are dropped once older
// than keep, when the map has doubled; younger ones stay.
func TestSendSightsSweepsOldEntries(t *testing.T) {
	var s sendSights
	born := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	keep := time.Hour
	for i := range 1000 {
		s.read(sentRecord(fmt.Sprint("old", i), 1, born), born, keep)
	}
	later := born.Add(2 * time.Hour)
	for i := range 100 {
		s.read(sentRecord(fmt.Sprint("new", i), 1, later), later, keep)
	}
	require.Equal(t, 100, int(s.n.Load()), "entries left after the sweep")
	require.Len(t, s.m, 100)
	require.Equal(t, later, s.since(sentRecord("new0", 1, later)))
}

// TestSendSightsStepForwardCountedOnce: with the default Clock, a send
// another replica made, read ten seconds after a board booted eight days
// behind, then the clock stepped forward by NTP: the "not found" is held
// for the lag from the read, the step counted once. Read with its
// monotonic reading, the step was taken from an elapsed time that never
// held it, and the hold lasted the lag plus eight days: the order, never
// placed, was never resent while the process lived.
func TestSendSightsStepForwardCountedOnce(t *testing.T) {
	const behind = 8 * 24 * time.Hour
	c, bootNow := bootedClient()
	rec := sentRecord("other", 1, bootNow.Round(0).Add(-time.Hour)) // by another replica's clock
	c.sights.read(rec, bootNow.Add(10*time.Second), DefaultReconcileDeadline)

	held := wallStepped(t, bootNow.Add(10*time.Second+DefaultResultLag/2), behind)
	require.True(t, c.lagging(rec, held), "half the lag after the read, the step since")
	past := wallStepped(t, bootNow.Add(10*time.Second+DefaultResultLag+time.Minute), behind)
	require.False(t, c.lagging(rec, past), "a minute past the lag since the read, the step since")
}

// TestSendSightsOfAKeyUsedAgain: an entry of an operation settled
// elsewhere (Confirm, another replica) and pruned, its key used again: the
// new operation's send, its number no higher, is read afresh, and the old
// entry's time is never its lag's start; nor does a drive's own send
// undo the read of another replica's newer send.
func TestSendSightsOfAKeyUsedAgain(t *testing.T) {
	var s sendSights
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	keep := DefaultReconcileDeadline
	s.read(sentRecord("k", 3, t0), t0, keep)
	again := sentRecord("k", 1, t0.Add(48*time.Hour))
	require.True(t, s.since(again).IsZero(), "the old operation's entry, for the new one's send")
	s.read(again, t0.Add(49*time.Hour), keep)
	require.Equal(t, t0.Add(49*time.Hour), s.since(again), "the new operation's send, read")

	newer := sentRecord("k", 2, t0.Add(50*time.Hour))
	s.read(newer, t0.Add(51*time.Hour), keep)
	s.made(sentRecord("k", 1, t0.Add(48*time.Hour)), 0, t0.Add(51*time.Hour), keep)
	require.Equal(t, t0.Add(51*time.Hour), s.since(newer), "another replica's newer send, read after the drive released")
}

// TestSendSightsSweepSeesNoStep: a forward step of the wall clock past
// keep does not make a read minutes old look expired to a sweep: the hold
// stays, and the "not found" waits out the lag. Measured by the wall
// clock, the step swept the entry a minute into its lag, and a lagging
// result endpoint's "not found" placed the order again.
func TestSendSightsSweepSeesNoStep(t *testing.T) {
	const behind = 8 * 24 * time.Hour
	c, bootNow := bootedClient()
	rec := sentRecord("other", 1, bootNow.Round(0).Add(-3*time.Minute))
	c.sights.read(rec, bootNow.Add(10*time.Second), DefaultReconcileDeadline)

	now := wallStepped(t, bootNow.Add(10*time.Second+time.Minute), behind)
	for i := range 1100 { // past the sweep's threshold
		c.sights.read(sentRecord(fmt.Sprint("k", i), 1, now.Round(0)), now, DefaultReconcileDeadline)
	}
	require.False(t, c.sights.since(rec).IsZero(), "the read, a minute old, after a sweep")
	require.True(t, c.lagging(rec, now), "a minute into the lag since the read")
}

// bootedClient is a Client on the default Clock, born now, with the
// default result lag and deadline, and that reading of time.Now.
func bootedClient() (*Client, time.Time) {
	bootNow := time.Now()
	c := &Client{}
	c.cfg.clock = realClock{}
	c.cfg.resultLag = DefaultResultLag
	c.cfg.reconcileDeadline = DefaultReconcileDeadline
	c.born.Store(&bornReading{wall: bootNow.Round(0), read: bootNow})
	return c, bootNow
}
