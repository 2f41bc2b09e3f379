package main

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// A record settled while the clock was stepped back (its Settled time a
// month before its last send, which was yesterday) is not pruned with the
// month-old ones, and the dry run does not count it either: the dry run
// says what prune will do.
func TestPruneKeepsSettledWhileClockSteppedBack(t *testing.T) {
	f := newJournal(t)
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	const day = 24 * time.Hour
	body := []byte(`{"amount":100}`)
	sent := f.now.Add(-day)
	_, err = s.Create(context.Background(), &journal.Record{
		Scope: "default", Key: "k-stepped", Method: "POST", URL: "https://api.example.com/v1/orders",
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StateSucceeded,
		Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: sent, Done: true, Status: 201}},
		Created:  sent, FirstSent: sent,
		Updated: f.now.Add(-40 * day), Settled: f.now.Add(-40 * day),
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	stdout, stderr, code := runIdem(t, "prune", "-journal", f.path, "-settled-before", "720h", "-dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "would delete 2 settled operations")
	stdout, stderr, code = runIdem(t, "prune", "-journal", f.path, "-settled-before", "720h")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "deleted 2 settled operations")
	_, err = record(t, f.path, "default", "k-stepped")
	require.NoError(t, err, "k-stepped after prune")
}
