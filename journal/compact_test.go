package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestCompact: pruning leaves free pages behind; Compact gives them back
// without changing a single record, and leaves a journal that checks out.
func TestCompact(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.journal")
	s, err := journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	due := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const n, open = 3000, 50
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				key := fmt.Sprintf("k%05d", i)
				_, err := s.Create(ctx, journaltest.NewRecord("acct", key, due))
				require.NoError(t, err)
				if i < open {
					continue
				}
				_, err = s.Update(ctx, "acct", key, func(r *journal.Record) error {
					r.State, r.Settled, r.Updated = journal.StateSucceeded, due, due
					r.Result = &journal.Result{ResourceID: "res-" + key, StatusCode: 201}
					return nil
				})
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	pruned, err := s.Prune(ctx, due.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, n-open, pruned)
	before, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Len(t, before, open)

	// The application holds the lock: Compact refuses.
	_, err = journal.Compact(path, journal.WithLockTimeout(50*time.Millisecond))
	require.ErrorIs(t, err, journal.ErrLocked)
	require.NoError(t, s.Close())

	st, err := journal.Compact(path)
	require.NoError(t, err)
	require.Less(t, st.After, st.Before/2, "Compact() sizes %+v", st)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.Empty(t, compactCopies(t, path), "no copy left behind")
	require.NoError(t, journal.Check(path))

	s, err = journal.Open(path)
	require.NoError(t, err)
	defer s.Close()
	after, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Equal(t, before, after, "records after Compact()")
	var visited int
	require.NoError(t, s.ForEachOpen(ctx, func(*journal.Record) error { visited++; return nil }))
	require.Equal(t, open, visited, "open index after Compact()")
}

// TestCheckFindsDamage: an index that disagrees with the records is found.
func TestCheckFindsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	_, err = s.Create(context.Background(), journaltest.NewRecord("acct", "k", time.Now()))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, journal.Check(path))

	_, err = journal.Compact(path, journal.ReadOnly())
	require.ErrorIs(t, err, journal.ErrReadOnly)
	require.Error(t, journal.Check(filepath.Join(t.TempDir(), "missing.journal")))

	// Lose the open record's due-index entry behind the journal's back.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("due.seq")).Cursor()
		k, _ := c.First()
		require.NotNil(t, k)
		return c.Delete()
	}))
	require.NoError(t, db.Close())
	require.ErrorIs(t, journal.Check(path), journal.ErrCorrupt)
	_, err = journal.Compact(path)
	require.ErrorIs(t, err, journal.ErrCorrupt, "Compact() refuses to swap in a copy that does not check out")
	require.ErrorIs(t, journal.Check(path), journal.ErrCorrupt, "the journal is left as it was")
}

// TestInspectReports: Inspect says what it read, and lists each problem
// on its own, not only the first.
func TestInspectReports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		_, err = s.Create(ctx, journaltest.NewRecord("acct", k, time.Now()))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	rep, err := journal.Inspect(path)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, 3, rep.Records)
	require.Equal(t, fi.Size(), rep.FileSize)
	require.Positive(t, rep.Pages)
	require.LessOrEqual(t, rep.Pages*int64(os.Getpagesize()), fi.Size(), "pages in use fit the file")
	require.Empty(t, rep.Problems)

	// Lose two due-index entries behind the journal's back: two problems.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("due.seq")).Cursor()
		for range 2 {
			k, _ := c.First()
			require.NotNil(t, k)
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
	rep, err = journal.Inspect(path)
	require.ErrorIs(t, err, journal.ErrCorrupt)
	require.Equal(t, 3, rep.Records)
	require.Len(t, rep.Problems, 2, "%q", rep.Problems)
	for _, p := range rep.Problems {
		require.Contains(t, p, "missing index entry")
		require.NotContains(t, p, "\n")
	}

	// A file Open refuses is one problem.
	junk := filepath.Join(t.TempDir(), "junk.journal")
	require.NoError(t, os.WriteFile(junk, bytes.Repeat([]byte("junk"), 4096), 0o600))
	rep, err = journal.Inspect(junk)
	require.ErrorIs(t, err, journal.ErrCorrupt)
	require.Len(t, rep.Problems, 1)
	require.Contains(t, rep.Problems[0], "not an idem journal")
}
