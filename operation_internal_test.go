package idem

import (
	"testing"

	"github.com/idemkit/idem/journal"
)

func TestCompactAttemptsKeepsMaybeExecuted(t *testing.T) {
	rec := &journal.Record{}
	for i := 1; i <= 200; i++ {
		a := journal.Attempt{Number: i, Kind: journal.AttemptSubmit, Done: true}
		if i == 40 { // the only attempt that may have reached the server
			a.Wrote = true
		}
		rec.Attempts = append(rec.Attempts, a)
	}
	compactAttempts(rec)
	if got := len(rec.Attempts); got != maxAttemptEntries {
		t.Fatalf("len(Attempts) = %d; want %d", got, maxAttemptEntries)
	}
	if !pastOf(rec, 201).maybeExecuted {
		t.Fatalf("pastOf().maybeExecuted = false after compaction; attempt 40 was written")
	}
	if last := rec.Attempts[len(rec.Attempts)-1].Number; last != 200 {
		t.Fatalf("last attempt = %d; want 200", last)
	}
	for i := 1; i < len(rec.Attempts); i++ {
		if rec.Attempts[i].Number <= rec.Attempts[i-1].Number {
			t.Fatalf("attempt numbers out of order at %d: %v", i, rec.Attempts[i-1:i+1])
		}
	}
	if attemptCount(rec) != 200 {
		t.Fatalf("attemptCount() = %d; want 200", attemptCount(rec))
	}
}

// A replay is followed by queries only, which can outnumber the entries
// compaction keeps: the replay must survive, or the operation would look
// resendable again.
func TestCompactAttemptsKeepsReplay(t *testing.T) {
	rec := &journal.Record{}
	rec.Attempts = append(rec.Attempts, journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 504})
	for i := 2; i <= 30; i++ {
		rec.Attempts = append(rec.Attempts, journal.Attempt{Number: i, Kind: journal.AttemptQuery, Done: true, Status: 404})
	}
	rec.Attempts = append(rec.Attempts, journal.Attempt{Number: 31, Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 500, Replayed: true})
	for i := 32; i <= 300; i++ {
		rec.Attempts = append(rec.Attempts, journal.Attempt{Number: i, Kind: journal.AttemptQuery, Done: true, Status: 404})
		compactAttempts(rec)
	}
	if got := len(rec.Attempts); got > maxAttemptEntries+1 {
		t.Fatalf("len(Attempts) = %d; want at most %d", got, maxAttemptEntries+1)
	}
	if p := pastOf(rec, 301); !p.final || !p.maybeExecuted {
		t.Fatalf("pastOf() = %+v after compaction; want final and maybe executed", p)
	}
	for i := 1; i < len(rec.Attempts); i++ {
		if rec.Attempts[i].Number <= rec.Attempts[i-1].Number {
			t.Fatalf("attempt numbers out of order at %d: %v", i, rec.Attempts[i-1:i+1])
		}
	}
}
