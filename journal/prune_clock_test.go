package journal_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// Prune judges a settled record by the latest time it journals up to its
// settlement, not by its Settled time alone: one settled after the clock
// was stepped back (Settled days before its own sends) or sent while the
// clock ran fast (a time still in the future) is kept until that time is
// as old as the cut-off, and then pruned like any other.
func TestPruneJudgesByLatestTime(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	day := 24 * time.Hour
	settled := func(key string, settled time.Time, sent ...time.Time) {
		t.Helper()
		r := &journal.Record{Scope: "s", Key: key, Method: http.MethodPost, URL: "https://api.example.com/v1/orders",
			Body: []byte(`{}`), BodySHA: sha256.Sum256([]byte(`{}`)), State: journal.StatePending, Created: t0.Add(-9 * day), Updated: t0.Add(-9 * day)}
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
		_, err = s.Update(ctx, "s", key, func(r *journal.Record) error {
			for i, at := range sent {
				r.Attempts = append(r.Attempts, journal.Attempt{Number: i + 1, Kind: journal.AttemptSubmit, Start: at, Done: true, Status: 201})
				if i == 0 {
					r.FirstSent = at
				}
			}
			r.State, r.Settled, r.Updated = journal.StateSucceeded, settled, settled
			return nil
		})
		require.NoError(t, err)
	}
	settled("old", t0.Add(-9*day), t0.Add(-9*day))
	settled("stepped-back", t0.Add(-8*day), t0.Add(-9*day), t0) // retried at t0, settled with the clock 8 days behind
	settled("ran-fast", t0.Add(-8*day), t0.Add(30*day))         // sent with the clock 30 days ahead
	settled("never-sent", t0.Add(-8*day))                       // failed before any send: only Created and Settled
	require.Equal(t, 2, prune(t, s, t0.Add(-time.Hour)), "old and never-sent")
	for _, key := range []string{"stepped-back", "ran-fast"} {
		_, err := s.Get(ctx, "s", key)
		require.NoError(t, err, "Get(%s) after Prune()", key)
	}
	require.Equal(t, 1, prune(t, s, t0.Add(time.Second)), "stepped-back, once its last send is as old")
	require.Zero(t, prune(t, s, t0.Add(30*day)), "ran-fast, before its send")
	require.Equal(t, 1, prune(t, s, t0.Add(30*day+time.Second)), "ran-fast, once its send is as old")
	all, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Empty(t, all)
}

func prune(t *testing.T, s *journal.Store, before time.Time) int {
	t.Helper()
	n, err := s.Prune(context.Background(), before)
	require.NoError(t, err, "Prune(%v)", before)
	return n
}

// Prunable says what Prune does, so that the idem command's dry run counts
// what a prune would delete.
func TestRecordPrunable(t *testing.T) {
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	tests := []struct {
		name string
		r    journal.Record
		want bool
	}{
		{"settled before", journal.Record{State: journal.StateSucceeded, Created: at(-3), FirstSent: at(-3), Settled: at(-2)}, true},
		{"settled at the cut-off", journal.Record{State: journal.StateFailed, Created: at(-3), Settled: at(0)}, false},
		{"open", journal.Record{State: journal.StateUnknown, Created: at(-3), Settled: at(-2)}, false},
		{"sent after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(-3), Settled: at(-2),
			Attempts: []journal.Attempt{{Number: 1, Start: at(-3)}, {Number: 2, Start: at(1)}}}, false},
		{"first sent after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(-3), FirstSent: at(1), Settled: at(-2)}, false},
		{"created after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(5), Settled: at(-2)}, false},
		{"updated after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(-3), Settled: at(-2), Updated: at(5)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.r.Prunable(t0))
		})
	}
}
