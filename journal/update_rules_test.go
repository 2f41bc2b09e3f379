package journal_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestUpdateKeepsRequestAndResolution: promise 2 covers headers and
// the result URL too, and only Resolve may record a manual resolution.
func TestUpdateKeepsRequestAndResolution(t *testing.T) {
	ctx := context.Background()
	s, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k", time.Now()))
	require.NoError(t, err)
	changes := map[string]func(r *journal.Record){
		"header":   func(r *journal.Record) { r.Header.Set("X-Extra", "1") },
		"queryURL": func(r *journal.Record) { r.QueryURL = "https://elsewhere.example/ops/k" },
		"created":  func(r *journal.Record) { r.Created = r.Created.Add(time.Hour) },
		"resolved": func(r *journal.Record) { r.Resolved = &journal.Resolution{By: "forger", Reason: "x", At: time.Now()} },
	}
	for name, change := range changes {
		_, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error { change(r); return nil })
		require.ErrorIs(t, err, journal.ErrInvalid, name)
	}
}
