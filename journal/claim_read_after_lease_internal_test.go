package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClaimReadsTheRecordItLeases: Claim read the record, then took the
// lease. A holder that wrote the record between the two (two Clients
// sharing one Store; its lease expired, its write still fenced only by
// its token) handed the lease over with the record as it was before that
// write: the new holder drove the operation from a state the journal no
// longer held (an attempt it did not know was sent, a NextDue already
// moved on). A Claim that gets the lease must return the record as it is
// under that lease: taken first, the lease fences the old holder's write.
func TestClaimReadsTheRecordItLeases(t *testing.T) {
	ctx := context.Background()
	s, la, now := leasedToA(t)

	// A, its lease expired but still at work, writes as B claims.
	s.claimStep = func() {
		s.claimStep = nil
		_, err := s.Update(WithLease(ctx, la), "s", "a", func(r *Record) error {
			r.NextDue = now.Add(time.Hour)
			return nil
		})
		if !errors.Is(err, ErrLeaseLost) { // lost: B's lease fenced it
			require.NoError(t, err)
		}
	}
	later := now.Add(2 * time.Minute)
	r, lb, err := s.Claim(ctx, "s", "a", "B", later, later.Add(time.Minute))
	require.NoError(t, err)
	require.Nil(t, s.claimStep, "the step between lease and read ran")
	require.NotZero(t, lb.Token)
	got, err := s.Get(ctx, "s", "a")
	require.NoError(t, err)
	require.True(t, r.NextDue.Equal(got.NextDue), "B's lease came with the record as it was before A's last write (NextDue %s; the journal holds %s)", r.NextDue, got.NextDue)
}

// TestClaimSeesAWriteWhoseFenceItPassed: a write under A's lease checks
// the lease inside its round, then is logged and published. A Claim by B
// between that check and the publication took the lease (too late to
// fence the write) and read the record without the write: B drove the
// operation from a state the journal no longer held, as when it read
// before the claim. The claim must be ordered with the rounds: a write
// either is published before it, and read with the lease, or checks its
// lease after it, and is refused.
func TestClaimSeesAWriteWhoseFenceItPassed(t *testing.T) {
	ctx := context.Background()
	s, la, now := leasedToA(t)

	type claimed struct {
		r   *Record
		l   Lease
		err error
	}
	later := now.Add(2 * time.Minute)
	b := duringFencedWrite(t, s, la, now, "journal.(*Store).Claim", func() claimed {
		r, l, err := s.Claim(ctx, "s", "a", "B", later, later.Add(time.Minute))
		return claimed{r, l, err}
	})
	require.NoError(t, b.err)
	require.NotZero(t, b.l.Token)
	got, err := s.Get(ctx, "s", "a")
	require.NoError(t, err)
	require.True(t, b.r.NextDue.Equal(got.NextDue), "B's lease came with the record as it was before A's write (NextDue %s; the journal holds %s)", b.r.NextDue, got.NextDue)
	// B's lease is the record's: A's next write is refused.
	_, err = s.Update(WithLease(ctx, la), "s", "a", func(*Record) error { return nil })
	require.ErrorIs(t, err, ErrLeaseLost)
}

// leasedToA opens a journal holding record "a" of scope "s", leased to
// owner A from now for a minute.
func leasedToA(t *testing.T) (s *Store, la Lease, now time.Time) {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "j.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Create(context.Background(), newRecord("a"))
	require.NoError(t, err)
	now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	_, la, err = s.Claim(context.Background(), "s", "a", "A", now, now.Add(time.Minute))
	require.NoError(t, err)
	return s, la, now
}

// parkedIn reports whether a goroutine waits in a select or on a channel
// inside the function named fn (as a stack trace names it).
func parkedIn(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		parked := bytes.Contains(g, []byte("[select")) || bytes.Contains(g, []byte("[chan receive"))
		if parked && bytes.Contains(g, []byte(fn+"(")) {
			return true
		}
	}
	return false
}

// TestClaimDueSeesAWriteWhoseFenceItPassed: ClaimDue, as Claim did, took
// the lease of a record whose write under A's expired lease had passed
// its check in the round under way, and returned at once: Run's visit
// then read the record (Get) before that round published the write, and
// drove the operation from a state the journal no longer held. ClaimDue
// must wait for the round, and return the record with the write.
func TestClaimDueSeesAWriteWhoseFenceItPassed(t *testing.T) {
	ctx := context.Background()
	s, la, now := leasedToA(t)
	_, err := s.Update(WithLease(ctx, la), "s", "a", func(r *Record) error {
		r.NextDue = now
		return nil
	})
	require.NoError(t, err)

	type claimedDue struct {
		due []Claimed
		got *Record // read right after, as Run's visit does
		err error
	}
	later := now.Add(2 * time.Minute)
	b := duringFencedWrite(t, s, la, now, "journal.(*Store).ClaimDue", func() claimedDue {
		due, err := s.ClaimDue(ctx, "B", later, later.Add(time.Minute), 10)
		c := claimedDue{due: due, err: err}
		if err == nil && len(due) == 1 {
			c.got, c.err = s.Get(ctx, "s", "a")
		}
		return c
	})
	require.NoError(t, b.err)
	require.Len(t, b.due, 1, "a was due when B claimed")
	require.NotZero(t, b.due[0].Lease.Token)
	want := now.Add(time.Hour)
	require.True(t, b.got.NextDue.Equal(want), "B's visit read the record as it was before A's write (NextDue %s; A wrote %s)", b.got.NextDue, want)
	require.True(t, b.due[0].Record.NextDue.Equal(want), "ClaimDue returned the record as it was before A's write (NextDue %s)", b.due[0].Record.NextDue)
	_, err = s.Update(WithLease(ctx, la), "s", "a", func(*Record) error { return nil })
	require.ErrorIs(t, err, ErrLeaseLost, "B's lease is the record's")
}

// duringFencedWrite has B's claim (fn names it as a stack trace does)
// run while A, its lease on "a" expired but still at work, writes
// NextDue an hour on: B claims once A's write has passed its fence (the
// Update's fn runs after the check, in the round), and the write goes on
// once the claim has returned or waits for the round to end. It returns
// what claim returned.
func duringFencedWrite[T any](t *testing.T, s *Store, la Lease, now time.Time, fn string, claim func() T) T {
	t.Helper()
	done := make(chan T, 1)
	_, err := s.Update(WithLease(context.Background(), la), "s", "a", func(r *Record) error {
		go func() { done <- claim() }()
		if err := returnedOrParked(func() bool { return len(done) > 0 }, fn); err != nil {
			return err
		}
		r.NextDue = now.Add(time.Hour)
		return nil
	})
	require.NoError(t, err, "A's write, fenced before B's claim")
	select {
	case b := <-done:
		return b
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return", fn)
		panic("unreachable")
	}
}

// returnedOrParked waits, for a minute at most, until returned reports
// that the call under test returned or a goroutine parks in fn (see
// parkedIn): it either did not wait for the round under way or waits for
// it to end.
func returnedOrParked(returned func() bool, fn string) error {
	deadline := time.Now().Add(time.Minute)
	for !returned() && !parkedIn(fn) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s neither returned nor waited", fn)
		}
		runtime.Gosched()
	}
	return nil
}
