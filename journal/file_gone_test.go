package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A journal file removed while the Store has it open (a cleanup job, a
// deploy script's rm -rf of the data directory, a volume swapped under a
// container) took every write as ever, on a file nobody could open again:
// at the next start the journal was empty, and every operation still open
// in it (an "unknown" the caller was told idem would settle) was gone.
// The Store now notices at its next pass over the file, writes everything
// acknowledged into the file it has, and refuses every later call with an
// error that says how to save it while the process runs.
func TestRemovedFileStopsTheStore(t *testing.T) {
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			path := filepath.Join(dir, "j.db")
			// The applier's own passes wait an hour: the test's
			// Checkpoint is the pass that notices.
			s, err := Open(path, withApplyDelay(time.Hour))
			require.NoError(t, err)
			defer s.Close()
			for i := range 3 {
				_, err := s.Create(ctx, newRecord(fmt.Sprint("before-", i)))
				require.NoError(t, err)
			}
			require.NoError(t, s.Checkpoint(ctx))

			switch how {
			case "removed":
				require.NoError(t, os.Remove(path))
			case "replaced":
				other := filepath.Join(dir, "other.db")
				o, err := Open(other)
				require.NoError(t, err)
				require.NoError(t, o.Close())
				require.NoError(t, os.Rename(other, path))
			}
			// Acknowledged after the removal, before the Store could know:
			// in the log only, until the pass that notices.
			_, err = s.Create(ctx, newRecord("after"))
			require.NoError(t, err)

			err = s.Checkpoint(ctx)
			require.ErrorIs(t, err, ErrFileFailed, "the pass over the file notices")
			require.ErrorContains(t, err, "was "+how)
			if runtime.GOOS == "linux" {
				require.ErrorContains(t, err, fmt.Sprintf("/proc/%d/fd/", os.Getpid()), "says how to save the file")
			}
			_, err = s.Create(ctx, newRecord("refused"))
			require.ErrorIs(t, err, ErrFileFailed, "nothing more is journaled into a file that is gone")
			_, err = s.Get(ctx, "s", "before-0")
			require.ErrorIs(t, err, ErrFileFailed)

			// The file the Store had holds every acknowledged write: the
			// operator's copy of it (as the error says) opens whole.
			saved := filepath.Join(t.TempDir(), "saved.db")
			copyFile(t, s.file, saved)
			err = s.Close()
			require.ErrorIs(t, err, ErrFileFailed, "Close says it too")
			require.NotContains(t, err.Error(), "the next Open applies them")
			r, err := Open(saved, ReadOnly())
			require.NoError(t, err)
			defer r.Close()
			for _, k := range []string{"before-0", "before-1", "before-2", "after"} {
				_, err := r.Get(ctx, "s", k)
				require.NoError(t, err, "record %s in the saved file", k)
			}
		})
	}
}

// Writers busy as the file is found gone: every write acknowledged is in
// the file the Store holds, and every later one is refused, unwritten.
func TestRemovedFileUnderWritersKeepsEveryAcknowledgedWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour))
	require.NoError(t, err)
	defer s.Close()

	const writers = 8
	acked := make(chan string, writers*2000)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 { // bounded: the Store stops them well before
				k := fmt.Sprintf("w%d-%d", w, i)
				if _, err := s.Create(ctx, newRecord(k)); err != nil {
					require.ErrorIs(t, err, ErrFileFailed)
					require.NotErrorIs(t, err, ErrMaybeCommitted, "a refused round wrote nothing")
					return
				}
				acked <- k
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for len(acked) < writers*10 {
		require.True(t, time.Now().Before(deadline), "the writers never got going")
		runtime.Gosched()
	}
	require.NoError(t, os.Remove(path))
	require.ErrorIs(t, s.Checkpoint(ctx), ErrFileFailed)
	wg.Wait()
	close(acked)

	saved := filepath.Join(t.TempDir(), "saved.db")
	copyFile(t, s.file, saved)
	r, err := Open(saved, ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	n := 0
	for k := range acked {
		_, err := r.Get(ctx, "s", k)
		require.NoError(t, err, "acknowledged write %s in the saved file", k)
		n++
	}
	require.Less(t, n, writers*2000, "the writers were stopped")
}

// A journal opened by a relative path stays where it was opened when the
// process changes its working directory: the log's segments went to the
// new one, where the next Open, from the service's directory, never
// looked for them (a crash lost what they held), and the removal check
// took the file for gone.
func TestRelativePathSurvivesChdir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := Open("j.db")
	require.NoError(t, err)
	defer s.Close()
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	_, err = s.Create(ctx, newRecord("k"))
	require.NoError(t, err)
	segs, err := filepath.Glob(filepath.Join(dir, "j.db.log.*"))
	require.NoError(t, err)
	require.Len(t, segs, 1, "the log's segment beside the journal")
	stray, err := filepath.Glob(filepath.Join(elsewhere, "*"))
	require.NoError(t, err)
	require.Empty(t, stray, "nothing written in the new working directory")
	require.NoError(t, s.Checkpoint(ctx), "not taken for removed")
	_, err = s.Create(ctx, newRecord("k2"))
	require.NoError(t, err)
}

// copyFile copies the open file f to a new file at path, as an operator's
// cp /proc/<pid>/fd/<n> would.
func copyFile(t *testing.T, f *os.File, path string) {
	t.Helper()
	src, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil { // not Linux: read the open file itself
		src = f
	} else {
		defer src.Close()
	}
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(dst, io.NewSectionReader(src, 0, 1<<40))
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// The log's active segment removed while the Store writes to it (a
// cleanup job that deletes "*.log*" files) took every later round, each
// acknowledged, into a file nobody could read again, until the segment
// filled (8 MiB: hours of a quiet service). A crash before the applier
// copied a round into the journal file lost it. Truncated in place
// instead (logrotate's copytruncate), it kept its inode, and later rounds
// went after a hole of zeros where its header had been: the next Open
// refused the log ("bad magic") and the service could not start. The
// Store now notices at its next pass, copies everything into the file,
// removes a truncated segment, and starts a new one for the next round.
// It also warns its logger and counts the segment in Stats: it used to
// mend it without a word.
func TestLostLogSegmentIsReplaced(t *testing.T) {
	for _, how := range []string{"removed", "truncated"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "j.db")
			var logged bytes.Buffer
			s, err := Open(path, withApplyDelay(time.Hour), WithLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
			require.NoError(t, err)
			_, err = s.Create(ctx, newRecord("before"))
			require.NoError(t, err)
			segs, err := filepath.Glob(path + ".log.*")
			require.NoError(t, err)
			require.Len(t, segs, 1)
			if how == "removed" {
				require.NoError(t, os.Remove(segs[0]))
			} else {
				require.NoError(t, os.Truncate(segs[0], 0))
			}

			_, err = s.Create(ctx, newRecord("after"))
			require.NoError(t, err)
			require.NoError(t, s.Checkpoint(ctx), "a lost segment is no reason to stop")
			_, err = s.Create(ctx, newRecord("later"))
			require.NoError(t, err)
			now, err := filepath.Glob(path + ".log.*")
			require.NoError(t, err)
			require.Len(t, now, 1, "a new segment on disk, and only it")
			require.NotEqual(t, segs[0], now[0])
			// Mended, but not in silence: whatever removed it will do it
			// again. Once, though the pass after saw a healthy segment.
			require.NoError(t, s.Checkpoint(ctx))
			st, err := s.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, st.LostLogSegments)
			var warned map[string]any
			require.NoError(t, json.Unmarshal(logged.Bytes(), &warned), "one JSON line: %s", logged.String())
			require.Equal(t, "WARN", warned["level"])
			require.Equal(t, segs[0], warned["segment"])
			require.Equal(t, how, warned["how"])
			require.Contains(t, warned["msg"], "Exclude the journal's log segments")

			s.crash(t) // "later" is in the log only
			s, err = Open(path)
			require.NoError(t, err)
			defer s.Close()
			for _, k := range []string{"before", "after", "later"} {
				_, err := s.Get(ctx, "s", k)
				require.NoError(t, err, "acknowledged write %s after the crash", k)
			}
		})
	}
}
