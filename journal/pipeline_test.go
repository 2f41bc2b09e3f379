package journal

// Overlapping rounds (committer): a round runs its requests while the
// previous one is written and synced, never shows readers what is not
// durable, writes only once the previous round has ended, runs its
// requests again when what they read of the previous round failed, and
// Close waits for both.

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// holdFirstSync makes the first round written from now on wait, its bytes
// in the file and not yet synced, until release is closed; in is closed
// when it waits.
func holdFirstSync(s *Store) (in, release chan struct{}) {
	in, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.log.failWrite = func(header, written bool) error {
		if !header && written {
			once.Do(func() {
				close(in)
				<-release
			})
		}
		return nil
	}
	return in, release
}

// signalled waits for ch, failing the test after a deadline.
func signalled(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting: %s", what)
	}
}

// TestRoundRunsWhileThePreviousSyncs: while a round's bytes wait for their
// fdatasync, the next round runs its requests (the overlap), readers see
// neither round, and the next round's caller waits until the first round
// is durable.
func TestRoundRunsWhileThePreviousSyncs(t *testing.T) {
	ctx := context.Background()
	s, path := rvOpen(t)
	_, err := s.Create(ctx, newRecord("b"))
	require.NoError(t, err)

	in, release := holdFirstSync(s)
	aDone := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, newRecord("a"))
		aDone <- err
	}()
	signalled(t, in, "a's round written, waiting to sync")

	ran := make(chan struct{})
	var once sync.Once
	bDone := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, "s", "b", func(r *Record) error {
			once.Do(func() { close(ran) })
			r.Ref = "b1"
			return nil
		})
		bDone <- err
	}()
	signalled(t, ran, "b's round ran while a's sync was held")

	_, err = s.Get(ctx, "s", "a")
	require.ErrorIs(t, err, ErrNotFound, "a, not yet durable, is not readable")
	b, err := s.Get(ctx, "s", "b")
	require.NoError(t, err)
	require.Empty(t, b.Ref, "b's update, not yet written, is not readable")
	select {
	case err := <-bDone:
		t.Fatalf("b's Update returned (%v) before a's round was durable: b's round wrote first", err)
	default:
	}

	close(release)
	require.NoError(t, <-aDone, "a's Create")
	require.NoError(t, <-bDone, "b's Update")
	b, err = s.Get(ctx, "s", "b")
	require.NoError(t, err)
	require.Equal(t, "b1", b.Ref)

	s.crash(t)
	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "s", "a")
	require.NoError(t, err, "a after a crash")
	b, err = s.Get(ctx, "s", "b")
	require.NoError(t, err)
	require.Equal(t, "b1", b.Ref, "b after a crash")
}

// TestRoundRunsAgainWhenThePreviousFails: b's round runs its function on
// a's update, still being written; a's log write then fails (a plain
// error: nothing of it is in the journal). What b computed on a's update
// is void with it: b's function runs again, on the record without a's
// update, and that is what b writes.
func TestRoundRunsAgainWhenThePreviousFails(t *testing.T) {
	ctx := context.Background()
	s, path := rvOpen(t)
	_, err := s.Create(ctx, newRecord("r"))
	require.NoError(t, err)

	// a's round: its first write waits, then fails, and so does its
	// second try on a new segment (whose header voids the first).
	in, release := make(chan struct{}), make(chan struct{})
	failed := 0
	s.log.failWrite = func(header, written bool) error {
		if header || written || failed == 2 {
			return nil
		}
		if failed++; failed == 1 {
			close(in)
			<-release
		}
		return syscall.EIO
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, "s", "r", func(r *Record) error { r.Ref = "A"; return nil })
		aDone <- err
	}()
	signalled(t, in, "a's round writing")

	var mu sync.Mutex
	var saw []string
	ranOnA := make(chan struct{})
	bDone := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, "s", "r", func(r *Record) error {
			mu.Lock()
			defer mu.Unlock()
			saw = append(saw, r.Ref)
			if len(saw) == 1 {
				close(ranOnA)
			}
			r.Ref += "B"
			return nil
		})
		bDone <- err
	}()
	signalled(t, ranOnA, "b's round ran on a's update")
	close(release)

	aErr := <-aDone
	require.ErrorIs(t, aErr, syscall.EIO, "a's Update")
	require.NotErrorIs(t, aErr, ErrMaybeCommitted, "a's round was voided")
	require.NoError(t, <-bDone, "b's Update")
	mu.Lock()
	require.Equal(t, []string{"A", ""}, saw, "what b's function saw: a's update, then, run again, the record without it")
	mu.Unlock()
	r, err := s.Get(ctx, "s", "r")
	require.NoError(t, err)
	require.Equal(t, "B", r.Ref)

	s.crash(t)
	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	r, err = s.Get(ctx, "s", "r")
	require.NoError(t, err)
	require.Equal(t, "B", r.Ref, "after a crash")
	require.NoError(t, s.viewChecked())
}

// TestCloseWaitsForOverlappingRounds: Close, called while one round waits
// for its fdatasync and the next has run its requests, returns only once
// both are durable.
func TestCloseWaitsForOverlappingRounds(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Create(ctx, newRecord("b"))
	require.NoError(t, err)

	in, release := holdFirstSync(s)
	aDone := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, newRecord("a"))
		aDone <- err
	}()
	signalled(t, in, "a's round written, waiting to sync")
	ran := make(chan struct{})
	var once sync.Once
	bDone := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, "s", "b", func(r *Record) error {
			once.Do(func() { close(ran) })
			r.Ref = "b1"
			return nil
		})
		bDone <- err
	}()
	signalled(t, ran, "b's round ran")

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	require.Eventually(t, s.closed.Load, 10*time.Second, time.Millisecond, "Close called")
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a round waited for its fdatasync", err)
	default:
	}
	close(release)
	require.NoError(t, <-aDone)
	require.NoError(t, <-bDone)
	require.NoError(t, <-closed)

	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "s", "a")
	require.NoError(t, err)
	b, err := s.Get(ctx, "s", "b")
	require.NoError(t, err)
	require.Equal(t, "b1", b.Ref)
}

// TestWritersQueuedDuringASyncJoinTheNextWrite: a writer that queues
// while one round syncs and the next waits to write joins the waiting
// round: the three writes take two log writes, not three.
func TestWritersQueuedDuringASyncJoinTheNextWrite(t *testing.T) {
	ctx := context.Background()
	s, _ := rvOpen(t)
	_, err := s.Create(ctx, newRecord("b"))
	require.NoError(t, err)
	before := s.c.rounds.Load()

	in, release := holdFirstSync(s)
	aDone := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, newRecord("a"))
		aDone <- err
	}()
	signalled(t, in, "a's round written, waiting to sync")
	ran := make(chan struct{})
	var once sync.Once
	bDone := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, "s", "b", func(r *Record) error {
			once.Do(func() { close(ran) })
			r.Ref = "b1"
			return nil
		})
		bDone <- err
	}()
	signalled(t, ran, "b's round ran")
	cDone := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, newRecord("c"))
		cDone <- err
	}()
	rvWaitQueued(t, s, 1)

	close(release)
	require.NoError(t, <-aDone)
	require.NoError(t, <-bDone)
	require.NoError(t, <-cDone)
	require.Equal(t, int64(2), s.c.rounds.Load()-before, "rounds: a's, then b's with c")
	for _, k := range []string{"a", "b", "c"} {
		_, err := s.Get(ctx, "s", k)
		require.NoError(t, err, k)
	}
}
