package journal

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// pruneRecords is how many settled operations the prune fixture holds.
const pruneRecords = 100_000

// pruneFixture writes a journal of pruneRecords settled operations,
// indexed as settled two days before t0 but sent at t0, and returns its
// path: a Prune at t0 + 1 h deletes every one of them, a Prune at
// t0 - 1 h reads every one and keeps it (Record.Prunable).
func pruneFixture(b *testing.B) string {
	path := newJournalFile(b)
	putRecords(b, path, pruneRecords, func(i int) *Record {
		r := benchRecord(fmt.Sprintf("prune-%09d", i), benchBody, benchSHA)
		_ = settleRecord(r)
		r.Settled = t0.Add(-48*time.Hour + time.Duration(i)*time.Millisecond)
		return r
	})
	return path
}

// BenchmarkPrune times one Prune over the settled index of pruneRecords
// operations: "delete" prunes every one (a fresh copy of the fixture per
// run, copied and opened outside the timer), "keep" reads every one and
// keeps it (sent after the cut-off), which isolates Prune's reading of
// the records from bbolt's deletions.
func BenchmarkPrune(b *testing.B) {
	ctx := context.Background()
	fixture := pruneFixture(b)
	b.Run("delete", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s, err := Open(copyTo(b, b.TempDir(), fixture), WithUnsafeNoSync())
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			n, err := s.Prune(ctx, t0.Add(time.Hour))
			b.StopTimer()
			if err != nil || n != pruneRecords {
				b.Fatalf("Prune() = %d, %v; want %d", n, err, pruneRecords)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("keep", func(b *testing.B) {
		s, err := Open(copyTo(b, b.TempDir(), fixture), WithUnsafeNoSync())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			n, err := s.Prune(ctx, t0.Add(-time.Hour))
			if err != nil || n != 0 {
				b.Fatalf("Prune() = %d, %v; want 0", n, err)
			}
		}
	})
}
