package journal

// Open's lock, and what a Store does once closed.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestLockTimeoutBounded checks promise 9: a second Open of a held
// journal, for writing or read-only, fails with ErrLocked after a bounded
// wait, including with a zero (single try) timeout; the holder is
// unaffected.
func TestLockTimeoutBounded(t *testing.T) {
	s, path := rvOpen(t)
	for _, opts := range [][]Option{
		{WithLockTimeout(50 * time.Millisecond)},
		{WithLockTimeout(0)},
		{WithLockTimeout(-time.Second), ReadOnly()},
		{WithLockTimeout(50 * time.Millisecond), ReadOnly()},
	} {
		start := time.Now()
		s2, err := Open(path, opts...)
		if err == nil {
			s2.Close()
		}
		require.ErrorIs(t, err, ErrLocked)
		require.Contains(t, err.Error(), path)
		require.Less(t, time.Since(start), 5*time.Second, "bounded wait")
	}
	_, err := s.Create(context.Background(), rvRecord("after", rvT0))
	require.NoError(t, err, "the holder still writes")
}

// TestErrorsAfterClose checks that every method refuses after Close
// rather than touching a closed file, including Stats and a ForEachOpen
// whose fn closes the Store half-way.
func TestErrorsAfterClose(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	for i := range openPage + 10 {
		_, err := s.Create(ctx, rvRecord(fmt.Sprint(i), rvT0.Add(time.Duration(i)*time.Second)))
		require.NoError(t, err)
	}
	visits := 0
	err := s.ForEachOpen(ctx, func(*Record) error {
		visits++
		if visits == 1 {
			require.NoError(t, s.Close())
		}
		return nil
	})
	require.ErrorIs(t, err, ErrClosed, "ForEachOpen() past Close")
	require.Equal(t, openPage, visits, "the page read before Close")
	_, err = s.Stats(ctx)
	require.ErrorIs(t, err, ErrClosed, "Stats()")
	_, err = s.Due(ctx, rvT0, 0)
	require.ErrorIs(t, err, ErrClosed, "Due()")
}

// TestOpenWaitingDuringCompactUsesTheNewFile: Compact "holds the
// journal's lock throughout" and renames the copy over the journal. A
// process that starts meanwhile (the application, restarted by its
// supervisor) has already opened the *old* file when it waits for the
// lock; when Compact releases it, that process locks and writes the old,
// now unlinked, inode. Every write it acknowledges is lost when it exits:
// promise 1 and the Store contract ("durable when it returns"), and
// promise 9 (single writer: the new file has no lock holder at all).
//
// The test does to the file what Compact does, with the waiting Open
// between its steps; Linux only (it watches /proc/self/fd to know the
// waiter has the old file open).
func TestOpenWaitingDuringCompactUsesTheNewFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("watches /proc/self/fd")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	holder, err := Open(path) // Compact's source Store, holding the lock
	require.NoError(t, err)
	_, err = holder.Create(ctx, rvRecord("before", rvT0))
	require.NoError(t, err)

	type opened struct {
		s   *Store
		err error
	}
	waiter := make(chan opened, 1)
	go func() {
		s, err := Open(path, WithLockTimeout(time.Minute))
		waiter <- opened{s, err}
	}()
	deadline := time.Now().Add(time.Minute)
	for rvOpenFDs(t, path) < 2 {
		require.True(t, time.Now().Before(deadline), "the waiter never opened the file")
		runtime.Gosched()
	}

	// Compact: copy, sync, rename over the journal, then close the source.
	// Its copy holds every write and depends on no log (metaLogDep).
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".compact", data, 0o600))
	copied, err := bolt.Open(path+".compact", 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, copied.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(metaLogDep) }))
	require.NoError(t, copied.Close())
	holder.replaced.Store(true)
	require.NoError(t, os.Rename(path+".compact", path))
	require.NoError(t, holder.Close())

	w := <-waiter
	require.NoError(t, w.err)
	_, err = w.s.Create(ctx, rvRecord("after", rvT0))
	require.NoError(t, err, "acknowledged write")
	require.NoError(t, w.s.Close())

	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "s", "after")
	require.NoError(t, err, "a write acknowledged by a Store that waited out a Compact is not in the journal")
}

// rvOpenFDs counts this process's descriptors open on path.
func rvOpenFDs(t *testing.T, path string) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestSecondOpenInProcessSaysSo: issue 10, item 7. A second Open of a
// journal this process already holds said "another process (probably the
// running application) holds the journal's lock", sending the operator
// after a process that does not exist. It now says the journal is already
// open in this process, and how (read-only or for writing), whatever name
// the file is reached by; the error still matches ErrLocked. Once the
// holder closes, Open works again.
func TestSecondOpenInProcessSaysSo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	link := filepath.Join(dir, "link.db")
	hard := filepath.Join(dir, "hard.db")
	w, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(path, link))
	require.NoError(t, os.Link(path, hard))

	// second opens the file by name with opts, and returns the error.
	second := func(name string, opts ...Option) error {
		t.Helper()
		s, err := Open(name, append(opts, WithLockTimeout(20*time.Millisecond))...)
		if err == nil {
			require.NoError(t, s.Close())
			return nil
		}
		require.ErrorIs(t, err, ErrLocked)
		require.NotContains(t, err.Error(), "another process", "Open(%s)", name)
		require.Equal(t, 1, strings.Count(err.Error(), "journal:"), "say it once: %v", err)
		return err
	}
	for _, name := range []string{path, link, hard} {
		for _, opts := range [][]Option{nil, {ReadOnly()}} {
			err := second(name, opts...)
			require.ErrorContains(t, err, "journal: open "+name+": already open for writing in this process; use that Store, or close it first")
		}
	}
	require.NoError(t, w.Close())

	// Read-only Stores share the file; a writer is kept out, and told why.
	r1, err := Open(path, ReadOnly())
	require.NoError(t, err)
	require.NoError(t, second(hard, ReadOnly()), "a second read-only Open")
	require.ErrorContains(t, second(link), "already open read-only in this process")
	require.NoError(t, r1.Close())
	require.NoError(t, second(path), "Open after the holder closed")
}
