package idem

import (
	"math"
	"math/rand/v2"
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

// Compaction never changes what pastOf reads from a history: whether it
// may have executed, whether the answer is final, whether the key was
// contested, and up to the third, how many refusals came after a send
// that may have executed; nor whether a query found another request's
// result under the key (journal.FoundOther).
func TestCompactAttemptsKeepsThePast(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []journal.Attempt{
		{Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 429, Refused: true},
		{Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 409, Refused: true},
		{Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 422, Refused: true},
		{Kind: journal.AttemptSubmit, Done: true, Refused: true}, // never written
		{Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 502},
		{Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 201, Replayed: true, Refused: true},
		{Kind: journal.AttemptQuery, Wrote: true, Done: true, Status: 404},
		{Kind: journal.AttemptSubmit, Wrote: true, Done: true, Status: 409, Refused: true, Err: conflictAfterSend + ": 409: Idempotency Key Reused"},
		{Kind: journal.AttemptQuery, Wrote: true, Done: true, Status: 200, Err: journal.QueryFoundOther + " (amount 55.00, ours 123.45)"},
	}
	for h := range 2000 {
		rec := &journal.Record{}
		n := 60 + rng.IntN(200)
		weights := []int{rng.IntN(10), rng.IntN(3), rng.IntN(3), rng.IntN(5), rng.IntN(2), rng.IntN(2), rng.IntN(20) + 1, rng.IntN(2), rng.IntN(2)}
		total := 0
		for _, w := range weights {
			total += w
		}
		for i := 1; i <= n; i++ {
			r := rng.IntN(total)
			k := 0
			for r >= weights[k] {
				r -= weights[k]
				k++
			}
			a := kinds[k]
			a.Number = i
			rec.Attempts = append(rec.Attempts, a)
			want, wantCopies, wantOther := pastOf(rec, math.MaxInt), min(executedCopies(rec), 2), journal.FoundOther(rec)
			compactAttempts(rec)
			got := pastOf(rec, math.MaxInt)
			if other := journal.FoundOther(rec); other != wantOther {
				t.Fatalf("history %d, after attempt %d: journal.FoundOther = %t after compaction; want %t", h, i, other, wantOther)
			}
			if copies := min(executedCopies(rec), 2); copies != wantCopies {
				t.Fatalf("history %d, after attempt %d: %d copies may have executed after compaction; want %d", h, i, copies, wantCopies)
			}
			// Refusals beyond the third change nothing: the third leaves
			// the operation for a person.
			if got.maybeExecuted != want.maybeExecuted || got.final != want.final || got.contested != want.contested ||
				min(got.refusals, maxRefusalsAfterSend) != min(want.refusals, maxRefusalsAfterSend) {
				t.Fatalf("history %d, after attempt %d: pastOf(compacted) = %+v; want %+v", h, i, got, want)
			}
			if len(rec.Attempts) > maxAttemptEntries+7 {
				t.Fatalf("history %d: %d entries after compaction", h, len(rec.Attempts))
			}
		}
	}
}

// executedCopies is how many copies of rec's request may have executed,
// as Confirm counts them (journal.ApplyConfirmation): more than one, to a
// server that ignores the key, may have charged twice.
func executedCopies(rec *journal.Record) int {
	n := 0
	for _, a := range rec.Attempts {
		if maybeExecuted(a) {
			n++
			if a.Resent {
				n++
			}
		}
	}
	return n
}

// A Solidgate payment endpoint ("A value of ignored means the endpoint
// does not" de-duplicate by the key,
// https://api-docs.solidgate.com/api/v2/idempotent-requests) behind a
// host that refused connections for the first sixteen attempts: the
// seventeenth charged and its answer was lost, the result endpoint did
// not know the payment yet, the resend charged again and was answered
// 500 marked ignored (flagged ReviewKeyIgnored), and the daily recheck
// of the flagged operation queried it for seven weeks (modelled: a status
// endpoint that answers 404 for a payment it does not find). Compaction
// kept one of the two sends; the event that then settled it cleared the
// review of an operation that may have charged twice.
func TestCompactAttemptsKeepsASecondSend(t *testing.T) {
	rec := &journal.Record{State: StateUnknown, Review: ReviewKeyIgnored}
	add := func(a journal.Attempt) {
		a.Number = len(rec.Attempts) + 1
		a.Done = true
		rec.Attempts = append(rec.Attempts, a)
		compactAttempts(rec)
	}
	for range 16 {
		add(journal.Attempt{Kind: journal.AttemptSubmit, Refused: true, Err: "dial tcp 127.0.0.1:443: connect: connection refused"})
	}
	add(journal.Attempt{Kind: journal.AttemptSubmit, Wrote: true, Err: "EOF"})
	for range 3 {
		add(journal.Attempt{Kind: journal.AttemptQuery, Wrote: true, Status: 404})
	}
	add(journal.Attempt{Kind: journal.AttemptSubmit, Wrote: true, Status: 500})
	for range 49 {
		add(journal.Attempt{Kind: journal.AttemptQuery, Wrote: true, Status: 404})
	}
	if got := executedCopies(rec); got != 2 {
		t.Fatalf("%d sends that may have executed kept of 2 (%d entries)", got, len(rec.Attempts))
	}
	effect, err := journal.ApplyConfirmation(rec, journal.Confirmation{State: StateSucceeded, ResourceID: "pay_2",
		Source: "solidgate", EventID: "evt_pay_2_settle_ok", At: rec.Attempts[len(rec.Attempts)-1].Start.Add(1)})
	if err != nil || effect != journal.ConfirmSettled {
		t.Fatalf("ApplyConfirmation() = %v, %v; want settled", effect, err)
	}
	if rec.Review != ReviewMaybeTwice {
		t.Fatalf("Review = %q after the event; want ReviewMaybeTwice", rec.Review)
	}
}
