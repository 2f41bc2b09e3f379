package journal

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The stand-ins below fail a round's log write the ways a disk can: before
// anything reaches the file, or once the bytes are in it and their
// fdatasync fails (they may then be on disk or not); and, after either,
// the new segment that voids the failed round may fail in turn. The
// strace tests in the root package's commit_failure_test.go fail the real
// system calls.

// logFault describes which of the log's writes fail, counted from the
// next round on.
type logFault struct {
	written bool // fail after the bytes are written (a failed fdatasync)
	writes  int  // how many writes of the round's bytes fail (0: one)
	headers int  // how many new segments' headers fail, after the first failed write
}

// install makes the next rounds' writes fail as f says.
func (f logFault) install(s *Store) {
	writes, headers, failed := max(f.writes, 1), f.headers, false
	s.log.failWrite = func(header, written bool) error {
		switch {
		case header && failed && headers > 0 && written:
			headers--
			return syscall.EIO
		case !header && writes > 0 && written == f.written:
			writes--
			failed = true
			return syscall.EIO
		}
		return nil
	}
}

// TestCommitFailureRound: a round whose log write fails is written again
// on a new segment; if that fails too, all its requests get one answer: a
// plain error when a new segment voided whatever the writes left, or when
// they left nothing, ErrMaybeCommitted when they may have left the round
// and that new segment failed too. Either way nothing
// of the round is visible in this process, and the next round commits on
// what was current before it.
func TestCommitFailureRound(t *testing.T) {
	fnErr := errors.New("fn decided not to write")
	tests := []struct {
		name  string
		fault logFault
		ok    bool // the second try succeeded
		maybe bool
	}{
		{name: "write fails once", fault: logFault{}, ok: true},
		{name: "fdatasync fails once", fault: logFault{written: true}, ok: true},
		{name: "write fails twice", fault: logFault{writes: 2}},
		{name: "fdatasync fails twice", fault: logFault{written: true, writes: 2}},
		{name: "fdatasync fails, then the new segment", fault: logFault{written: true, headers: 1}, maybe: true},
		// write(2) that fails with nothing written (ENOSPC on a full
		// disk, where the new segment's header fails in turn): nothing
		// of the round reached the file, so nothing needs voiding.
		{name: "write fails, then the new segment", fault: logFault{headers: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := rvOpen(t)
			var saw0 int
			first := &request{run: bump(&saw0)}
			require.NoError(t, s.c.do(first))
			require.NoError(t, first.err)

			tt.fault.install(s)
			var saw1, saw3 int
			round := []*request{
				{run: bump(&saw1)},
				{run: func(*view, *request) error { return fnErr }},
				{run: bump(&saw3)},
			}
			rvCommit(t, s, round...)
			want := "1"
			if tt.ok {
				require.NoError(t, round[0].err)
				require.ErrorIs(t, round[1].err, fnErr, "a request's own error stands")
				require.NoError(t, round[2].err)
				want = "3"
			} else {
				for i, r := range round {
					require.ErrorIs(t, r.err, syscall.EIO, "request %d: the round's fate, not its own", i)
					if tt.maybe {
						require.ErrorIs(t, r.err, ErrMaybeCommitted, "request %d", i)
					} else {
						require.NotErrorIs(t, r.err, ErrMaybeCommitted, "request %d: voided", i)
					}
				}
			}
			got, err := s.Get(context.Background(), "s", "c")
			require.NoError(t, err)
			require.Equal(t, want, got.Ref, "what the round left visible")

			// The committer goes on: the next round commits on top of
			// what was current, and voids the failed round on disk.
			s.log.failWrite = nil
			var saw int
			next := &request{run: bump(&saw)}
			require.NoError(t, s.c.do(next))
			require.NoError(t, next.err)
			n, _ := strconv.Atoi(want)
			require.Equal(t, n, saw, "the next round builds on what is current")
		})
	}
}

// TestCommitFailureStore: Create and Update through a Store answer a failed
// log write as the round's fate says, and what they answer holds after a
// reopen: a plain error is never in the journal; ErrMaybeCommitted may
// come back after a crash (the bytes reached the file and nothing voided
// them), and is gone once a later write succeeded.
func TestCommitFailureStore(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		fault    logFault
		maybe    bool
		thenGood bool // a successful write follows before the reopen
		present  bool // the failed writes are there after the reopen
	}{
		{name: "write fails twice", fault: logFault{writes: 2}},
		{name: "fdatasync fails twice", fault: logFault{written: true, writes: 2}},
		{name: "unvoided, then crash", fault: logFault{written: true, headers: 2}, maybe: true, present: true},
		{name: "unvoided, then a good write", fault: logFault{written: true, headers: 2}, maybe: true, thenGood: true},
		{name: "nothing written, then the new segment", fault: logFault{headers: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			s, err := Open(path)
			require.NoError(t, err)
			_, err = s.Create(ctx, newRecord("old"))
			require.NoError(t, err)

			tt.fault.install(s)
			_, cerr := s.Create(ctx, newRecord("k"))
			if tt.maybe {
				// The second failing header: this write's new segment.
				require.ErrorIs(t, cerr, ErrMaybeCommitted, "Create")
				_, uerr := s.Update(ctx, "s", "old", func(r *Record) error { r.State = StateProcessing; return nil })
				require.ErrorIs(t, uerr, errLogPoisoned, "Update while the log cannot start a segment")
				require.NotErrorIs(t, uerr, ErrMaybeCommitted, "nothing of it was written")
			} else {
				require.ErrorIs(t, cerr, syscall.EIO, "Create")
				require.NotErrorIs(t, cerr, ErrMaybeCommitted, "Create")
			}
			s.log.failWrite = nil
			_, err = s.Get(ctx, "s", "k")
			require.ErrorIs(t, err, ErrNotFound, "in this process")
			if tt.thenGood {
				_, err := s.Create(ctx, newRecord("good"))
				require.NoError(t, err)
			}
			// A crash: the Store is abandoned, its log as it is (a
			// second Store can open the file once the lock is gone).
			s.crash(t)

			s, err = Open(path)
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Get(ctx, "s", "k")
			if tt.present {
				require.NoError(t, err, "after a reopen")
			} else {
				require.ErrorIs(t, err, ErrNotFound, "after a reopen")
			}
			old, err := s.Get(ctx, "s", "old")
			require.NoError(t, err)
			require.Equal(t, StatePending, old.State, "after a reopen")
			require.NoError(t, s.viewChecked())
		})
	}
}
