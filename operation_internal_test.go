package idem

import (
	"testing"

	"github.com/idemkit/idem/journal"
)

func TestCompactAttemptsKeepsMaybeSent(t *testing.T) {
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
	if !maybeSent(rec) {
		t.Fatalf("maybeSent() = false after compaction; attempt 40 was written")
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
