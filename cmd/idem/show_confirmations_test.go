package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestShowConfirmations: show, as text and JSON, lists what webhook events
// said about an operation, a contradiction included.
func TestShowConfirmations(t *testing.T) {
	f := newJournal(t)
	at := confirmConflict(t, f.path)

	stdout, stderr, code := runIdem(t, "-journal", f.path, "show", "k-succeeded")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "review:     "+journal.ReviewConfirmConflict+"\n")
	require.Regexp(t, `(?m)^confirmation \(conflicted\): stripe-webhook event evt_9 at 2026-12-01T10:00:00.000Z: failed - charge.failed$`, stdout)

	stdout, stderr, code = runIdem(t, "-journal", f.path, "show", "-json", "k-succeeded")
	require.Equal(t, 0, code, stderr)
	var got struct {
		Confirmations []confirmationJSON `json:"confirmations"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, []confirmationJSON{{Source: "stripe-webhook", EventID: "evt_9", State: journal.StateFailed, Reason: "charge.failed", At: at, Effect: "conflicted"}}, got.Confirmations)
}

// TestRemoteShowConfirmations: -url show, through the admin handler,
// lists the webhook events file mode lists: the contradiction a flagged
// operation's review reason names must be visible to whoever looks.
func TestRemoteShowConfirmations(t *testing.T) {
	f := newJournal(t)
	confirmConflict(t, f.path)

	remote, stderr, code := runIdem(t, "-url", serveJournal(t, f.path), "show", "k-succeeded")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^confirmation \(conflicted\): stripe-webhook event evt_9 at 2026-12-01T10:00:00.000Z: failed - charge.failed$`, remote)
}

// confirmConflict records, in the journal at path, a webhook event that
// contradicts k-succeeded, and returns when it was recorded.
func confirmConflict(t testing.TB, path string) time.Time {
	t.Helper()
	s, err := journal.Open(path)
	require.NoError(t, err)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	_, err = s.Confirm(context.Background(), "default", "k-succeeded", journal.Confirmation{
		State: journal.StateFailed, Source: "stripe-webhook", EventID: "evt_9", Reason: "charge.failed", At: at})
	require.ErrorIs(t, err, journal.ErrConfirmConflict)
	require.NoError(t, s.Close())
	return at
}

// TestRemoteShowKeyInUse: the server's answer that another request holds
// the key is recorded as a confirmation marked key_in_use; -url show
// -json, through the admin handler, dropped the mark that file mode
// shows (admin.Confirmation had no field for it).
func TestRemoteShowKeyInUse(t *testing.T) {
	f := newJournal(t)
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	_, err = s.Confirm(context.Background(), "default", "k-succeeded", journal.Confirmation{
		State: journal.StateSucceeded, Source: "idem: server response", EventID: "attempt 2",
		Reason: "the server's answer that another request holds the key", At: at, KeyInUse: true})
	require.ErrorIs(t, err, journal.ErrConfirmConflict)
	require.NoError(t, s.Close())

	// File mode first: the admin handler's service holds the journal's
	// lock once it serves.
	for _, mode := range []string{"-journal", "-url"} {
		args := []string{"-journal", f.path}
		if mode == "-url" {
			args = []string{"-url", serveJournal(t, f.path)}
		}
		stdout, stderr, code := runIdem(t, append(args, "show", "-json", "k-succeeded")...)
		require.Equal(t, 0, code, stderr)
		var got struct {
			Confirmations []confirmationJSON `json:"confirmations"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
		require.Len(t, got.Confirmations, 1, "%q", args)
		require.True(t, got.Confirmations[0].KeyInUse, "%q: key_in_use", args)
	}
}
