package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The stand-ins below fail a commit the two ways bbolt's Commit can leave
// it: before the meta page is written (a data page write or its fsync, a
// meta write that never reached the page cache: bbolt rolls back and the
// old tree stays current), or after (the last fsync: the new tree is
// current in this process, and perhaps on disk). The strace tests in
// the root package's commit_failure_test.go fail the real system calls.

// failBeforeMeta fails the first commit at a step before its meta page:
// the transaction's writes are made, then rolled back.
func failBeforeMeta(calls *int) func(*bolt.DB, func(*bolt.Tx) error) error {
	return func(db *bolt.DB, fn func(*bolt.Tx) error) error {
		*calls++
		if *calls > 1 {
			return db.Update(fn)
		}
		tx, err := db.Begin(true)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		_ = tx.Rollback()
		return syscall.EIO
	}
}

// failAfterMeta fails the first n commits after their meta page: each
// takes effect, and reports EIO.
func failAfterMeta(calls *int, n int) func(*bolt.DB, func(*bolt.Tx) error) error {
	return func(db *bolt.DB, fn func(*bolt.Tx) error) error {
		*calls++
		if err := db.Update(fn); err != nil || *calls > n {
			return err
		}
		return syscall.EIO
	}
}

// failBegin fails the first commit before its transaction begins.
func failBegin(calls *int) func(*bolt.DB, func(*bolt.Tx) error) error {
	return func(db *bolt.DB, fn func(*bolt.Tx) error) error {
		*calls++
		if *calls > 1 {
			return db.Update(fn)
		}
		return syscall.EIO
	}
}

// counter reads the counter bump increments.
func counter(t testing.TB, db *bolt.DB) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("c")).Get([]byte("n")); v != nil {
			n = binary.BigEndian.Uint64(v)
		}
		return nil
	}))
	return n
}

// TestCommitFailureRound: a round whose commit fails gets one answer for
// all its requests, and the right one for what the failure left: a plain
// error when nothing was committed, each request's own result when the
// round turns out committed and a second commit made it durable, and
// ErrMaybeCommitted for every request when that second commit fails too.
func TestCommitFailureRound(t *testing.T) {
	fnErr := errors.New("fn decided not to write")
	tests := []struct {
		name        string
		fail        func(calls *int) func(*bolt.DB, func(*bolt.Tx) error) error
		wantCalls   int    // commits tried: the round's, and a confirmation
		wantCounter uint64 // after the round
		want        func(t *testing.T, round []*request)
	}{
		{
			name:      "begin fails",
			fail:      failBegin,
			wantCalls: 1,
			want: func(t *testing.T, round []*request) {
				for i, r := range round {
					require.ErrorIs(t, r.err, syscall.EIO, "request %d", i)
					require.NotErrorIs(t, r.err, ErrMaybeCommitted, "request %d", i)
				}
			},
		},
		{
			name:      "fails before the meta page",
			fail:      failBeforeMeta,
			wantCalls: 1,
			want: func(t *testing.T, round []*request) {
				for i, r := range round {
					require.ErrorIs(t, r.err, syscall.EIO, "request %d", i)
					require.NotErrorIs(t, r.err, ErrMaybeCommitted, "request %d: nothing was committed", i)
				}
			},
		},
		{
			name:        "fails after the meta page, confirmed",
			fail:        func(calls *int) func(*bolt.DB, func(*bolt.Tx) error) error { return failAfterMeta(calls, 1) },
			wantCalls:   2,
			wantCounter: 2,
			want: func(t *testing.T, round []*request) {
				require.NoError(t, round[0].err)
				require.ErrorIs(t, round[1].err, fnErr, "a request's own error stands")
				require.NoError(t, round[2].err)
			},
		},
		{
			name:        "fails after the meta page, confirmation fails",
			fail:        func(calls *int) func(*bolt.DB, func(*bolt.Tx) error) error { return failAfterMeta(calls, 2) },
			wantCalls:   2,
			wantCounter: 2, // visible in this process: that is the danger
			want: func(t *testing.T, round []*request) {
				for i, r := range round {
					require.ErrorIs(t, r.err, ErrMaybeCommitted, "request %d", i)
					require.ErrorIs(t, r.err, syscall.EIO, "request %d", i)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := counterDB(t)
			calls := 0
			c := &committer{db: db, failCommit: tt.fail(&calls)}
			var saw1, saw3 uint64
			round := []*request{
				{run: bump(&saw1)},
				{run: func(*bolt.Tx, *request) error { return fnErr }},
				{run: bump(&saw3)},
			}
			for _, r := range round {
				r.done = make(chan struct{})
			}
			c.commit(round)
			for i, r := range round {
				select {
				case <-r.done:
				default:
					t.Fatalf("request %d not released", i)
				}
			}
			tt.want(t, round)
			require.Equal(t, tt.wantCalls, calls, "commits tried")
			require.Equal(t, tt.wantCounter, counter(t, db), "counter after the round")

			// The committer goes on: the next round commits on top of
			// whatever the failed one left.
			var saw uint64
			next := &request{run: bump(&saw), done: make(chan struct{})}
			c.failCommit = nil
			c.commit([]*request{next})
			require.NoError(t, next.err)
			require.Equal(t, tt.wantCounter, saw, "the next round builds on what is current")
		})
	}
}

// TestCommitFailureStore: Create and Update through a Store answer a failed
// commit as the round's fate says, and what they answer holds after a
// reopen.
func TestCommitFailureStore(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		fail    func(calls *int) func(*bolt.DB, func(*bolt.Tx) error) error
		present bool // the write is there after the failure
		maybe   bool // the error matches ErrMaybeCommitted
		noError bool
	}{
		{name: "before meta", fail: failBeforeMeta},
		{name: "after meta, confirmed", fail: func(c *int) func(*bolt.DB, func(*bolt.Tx) error) error { return failAfterMeta(c, 1) }, present: true, noError: true},
		{name: "after meta, unconfirmed", fail: func(c *int) func(*bolt.DB, func(*bolt.Tx) error) error { return failAfterMeta(c, 2) }, present: true, maybe: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			s, err := Open(path)
			require.NoError(t, err)
			defer func() { _ = s.Close() }()
			_, err = s.Create(ctx, newRecord("old"))
			require.NoError(t, err)

			calls := 0
			s.c.failCommit = tt.fail(&calls)
			_, cerr := s.Create(ctx, newRecord("k"))
			calls = 0
			_, uerr := s.Update(ctx, "s", "old", func(r *Record) error { r.State = StateProcessing; return nil })
			s.c.failCommit = nil
			for name, err := range map[string]error{"Create": cerr, "Update": uerr} {
				switch {
				case tt.noError:
					require.NoError(t, err, name)
				case tt.maybe:
					require.ErrorIs(t, err, ErrMaybeCommitted, name)
				default:
					require.ErrorIs(t, err, syscall.EIO, name)
					require.NotErrorIs(t, err, ErrMaybeCommitted, name)
				}
			}
			check := func(when string) {
				_, err := s.Get(ctx, "s", "k")
				old, oerr := s.Get(ctx, "s", "old")
				require.NoError(t, oerr)
				if tt.present {
					require.NoError(t, err, when)
					require.Equal(t, StateProcessing, old.State, when)
				} else {
					require.ErrorIs(t, err, ErrNotFound, when)
					require.Equal(t, StatePending, old.State, when)
				}
			}
			check("in this process")
			require.NoError(t, s.Close())
			s, err = Open(path)
			require.NoError(t, err)
			check("after a reopen")
		})
	}
}
