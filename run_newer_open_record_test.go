package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestResumeAndRunOutliveOpenRecordFromNewerIdem: after a rollback the
// journal holds an open operation the newer idem wrote in a record
// version this build does not read (this build's versions 4 and 5 are
// such records to the build before it). The scans of open operations
// failed on it with ErrVersion: Resume failed at start-up, Run stopped on
// its first pass, and every other open operation stayed unsent or
// unconfirmed until a person upgraded again. Resume and Run must skip
// it, send every other operation exactly once, count it in Stats, and a
// Submit of its key must still fail loudly, sending nothing.
func TestResumeAndRunOutliveOpenRecordFromNewerIdem(t *testing.T) {
	settled := make(chan *idem.Result, 8)
	e := newEnv(t, clientOpts(idem.WithSettleFunc(func(r *idem.Result) { settled <- r })))
	for _, k := range []string{"newer", "k0", "k1"} {
		_, err := e.client.Prepare(e.ctx, e.req(k, `{"amount":42}`))
		require.NoError(t, err)
	}
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())

	written := makeNewer(t, e.path, "open.seq", "newer")
	e.open()

	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err, "Resume at start-up")
	require.Equal(t, 2, sum.Visited)
	require.Equal(t, 2, sum.Succeeded)
	for _, k := range []string{"k0", "k1"} {
		require.Equal(t, journal.StateSucceeded, e.record(k).State, "operation %q", k)
		require.Equal(t, 1, e.srv.Effects(scope, k), "operation %q", k)
	}
	for range 2 {
		<-settled
	}

	_, err = e.client.LookupResource(e.ctx, "", "ord_missing")
	require.ErrorIs(t, err, idem.ErrNotFound, "the scan reads past the newer record")
	// An event confirmed by its key is refused, not dropped as not this
	// journal's: the README tells handlers to have it redelivered.
	_, err = e.client.Confirm(e.ctx, "", "newer", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_1",
		Source: "stripe-webhook", EventID: "evt_1"})
	require.ErrorIs(t, err, journal.ErrVersion)
	require.NotErrorIs(t, err, idem.ErrNotFound)

	// Its key is still taken: a second record or a send would be a
	// second order once the newer idem settles the first.
	_, err = e.client.Submit(e.ctx, e.req("newer", `{"amount":42}`))
	require.ErrorIs(t, err, journal.ErrVersion)
	_, err = e.client.Prepare(e.ctx, e.req("newer", `{"amount":42}`))
	require.ErrorIs(t, err, journal.ErrVersion)
	require.Empty(t, e.submits("newer"))
	require.Zero(t, e.srv.Effects(scope, "newer"))

	st, err := e.client.Stats(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Newer)
	require.Equal(t, 0, st.Open)

	// Run settles what is journaled after the rollback, pass after pass.
	keys := []string{"k2", "k3"}
	for _, k := range keys {
		_, err := e.client.Prepare(e.ctx, e.req(k, `{"amount":42}`))
		require.NoError(t, err)
	}
	got := runUntilSettled(t, e, settled, keys)
	for _, k := range keys {
		require.Equal(t, idem.StateSucceeded, got[k], "operation %q", k)
		require.Equal(t, 1, e.srv.Effects(scope, k), "operation %q", k)
	}
	require.Zero(t, e.srv.Effects(scope, "newer"))
	require.NoError(t, e.client.Health().LastJournalError)
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())

	require.Equal(t, written, storedRecord(t, e.path, "open.seq", "newer"), "the newer record untouched")
}
