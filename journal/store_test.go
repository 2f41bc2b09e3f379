package journal_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

var _ idem.Store = (*journal.Store)(nil)

// RemoveKeyIgnoring counts the newer idem's open records from the open
// ones only (TestRemoveKeyIgnoringOverDamagedSettledPage).
var _ idem.NewerOpenCounter = (*journal.Store)(nil)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openTemp opens a new journal in a temporary directory and, when the test
// ends, closes it and checks the file: bbolt's consistency check and the
// journal's indexes.
func openTemp(t testing.TB, opts ...journal.Option) (*journal.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := journal.Open(path, opts...)
	require.NoError(t, err, "Open(%s)", path)
	t.Cleanup(func() {
		require.NoError(t, s.Close(), "Close()")
		requireConsistent(t, path)
	})
	return s, path
}

func requireConsistent(t testing.TB, path string) {
	t.Helper()
	require.NoError(t, journal.CheckFile(path), "consistency of %s", path)
}

func TestConformance(t *testing.T) {
	journaltest.Run(t, func(t testing.TB) idem.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestConformanceNoSync(t *testing.T) {
	journaltest.Run(t, func(t testing.TB) idem.Store {
		s, _ := openTemp(t, journal.WithUnsafeNoSync())
		return s
	})
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	_, path := openTemp(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "journal file mode")
}

func TestReopenKeepsRecords(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	want, err := s.Create(ctx, journaltest.NewRecord("acct", "k", t0))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s2, err := journal.Open(path)
	require.NoError(t, err, "reopen")
	defer s2.Close()
	got, err := s2.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, path, s2.Path())
}

func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// boltFile makes a bbolt file shaped by fn.
func boltFile(t testing.TB, fn func(*bolt.Tx) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(fn))
	require.NoError(t, db.Close())
	return path
}

func TestOpenDamaged(t *testing.T) {
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	// A real journal with its meta page scribbled over.
	_, good := openTemp(t)
	tests := []struct {
		name string
		path func(t *testing.T) string
		want error
	}{
		{"random 10 bytes", func(t *testing.T) string { return writeFile(t, random(10)) }, journal.ErrCorrupt},
		{"random 4 KiB", func(t *testing.T) string { return writeFile(t, random(4096)) }, journal.ErrCorrupt},
		{"random 64 KiB", func(t *testing.T) string { return writeFile(t, random(64<<10)) }, journal.ErrCorrupt},
		{"text file", func(t *testing.T) string { return writeFile(t, []byte("hello, journal\n")) }, journal.ErrCorrupt},
		{"bbolt without meta", func(t *testing.T) string {
			return boltFile(t, func(tx *bolt.Tx) error {
				_, err := tx.CreateBucket([]byte("something-else"))
				return err
			})
		}, journal.ErrCorrupt},
		{"bbolt with wrong magic", func(t *testing.T) string {
			return boltFile(t, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("meta"))
				if err != nil {
					return err
				}
				return errors.Join(b.Put([]byte("magic"), []byte("etcd")), b.Put([]byte("version"), []byte{1}))
			})
		}, journal.ErrCorrupt},
		{"future version", func(t *testing.T) string {
			return boltFile(t, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("meta"))
				if err != nil {
					return err
				}
				return errors.Join(b.Put([]byte("magic"), []byte("idem-journal")),
					b.Put([]byte("version"), []byte{journal.FormatVersion + 1}))
			})
		}, journal.ErrVersion},
		{"meta pages scribbled", func(t *testing.T) string {
			data, err := os.ReadFile(good)
			require.NoError(t, err)
			copy(data[16:], random(8192-16)) // both meta pages, past the header
			return writeFile(t, data)
		}, journal.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path(t)
			for _, opts := range [][]journal.Option{nil, {journal.ReadOnly()}} {
				s, err := journal.Open(path, opts...)
				if err == nil {
					s.Close()
				}
				require.ErrorIs(t, err, tt.want, "Open(%v)", opts)
				require.Contains(t, err.Error(), path, "error names the path")
			}
		})
	}
}

func TestOpenEmptyBoltFileIsNew(t *testing.T) {
	// A process that died between creating the file and the first commit
	// leaves an empty bbolt file: that is a new journal, not a damaged one.
	path := boltFile(t, func(*bolt.Tx) error { return nil })
	_, err := journal.Open(path, journal.ReadOnly())
	require.ErrorIs(t, err, journal.ErrCorrupt, "read-only Open() cannot initialise")
	s, err := journal.Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	requireConsistent(t, path)
}

func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	_, err := journal.Open(path, journal.ReadOnly())
	require.ErrorIs(t, err, fs.ErrNotExist, "read-only Open() of a missing file")
	require.Contains(t, err.Error(), path)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist, "read-only Open() created the file")

	s, err := journal.Open(path)
	require.NoError(t, err)
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k", t0))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	ro, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	ro2, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err, "second read-only Open()")
	require.NoError(t, ro2.Close())

	_, err = ro.Get(ctx, "acct", "k")
	require.NoError(t, err, "Get()")
	due, err := ro.Due(ctx, t0, 0)
	require.NoError(t, err, "Due()")
	require.Len(t, due, 1)
	st, err := ro.Stats(ctx)
	require.NoError(t, err, "Stats()")
	require.Equal(t, 1, st.Total)

	_, err = ro.Create(ctx, journaltest.NewRecord("acct", "k2", t0))
	require.ErrorIs(t, err, journal.ErrReadOnly, "Create()")
	_, err = ro.Update(ctx, "acct", "k", func(*journal.Record) error { return nil })
	require.ErrorIs(t, err, journal.ErrReadOnly, "Update()")
	_, err = ro.Resolve(ctx, "acct", "k", journal.Manual{State: journal.StateFailed, Reason: "r", At: t0})
	require.ErrorIs(t, err, journal.ErrReadOnly, "Resolve()")
	_, err = ro.Prune(ctx, t0)
	require.ErrorIs(t, err, journal.ErrReadOnly, "Prune()")
}

func TestStats(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	for _, k := range []string{"a", "b", "c", "d"} {
		_, err := s.Create(ctx, journaltest.NewRecord("acct", k, t0))
		require.NoError(t, err)
	}
	_, err := s.Update(ctx, "acct", "b", func(r *journal.Record) error {
		r.State, r.Review = journal.StateUnknown, "key expired"
		return nil
	})
	require.NoError(t, err)
	_, err = s.Resolve(ctx, "acct", "c", journal.Manual{State: journal.StateSucceeded, Reason: "r", At: t0})
	require.NoError(t, err)

	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[journal.State]int{journal.StatePending: 2, journal.StateUnknown: 1, journal.StateSucceeded: 1}, st.ByState)
	require.Equal(t, 4, st.Total)
	require.Equal(t, 3, st.Open)
	require.Equal(t, 1, st.Review)
	require.Positive(t, st.FileSize)
}

func TestUpdatePanicReachesCaller(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	_, err := s.Create(ctx, journaltest.NewRecord("acct", "k", t0))
	require.NoError(t, err)
	require.PanicsWithValue(t, "boom", func() {
		_, _ = s.Update(ctx, "acct", "k", func(*journal.Record) error { panic("boom") })
	})
	// The committer survived and nothing was written.
	got, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error {
		r.Review = "after panic"
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "after panic", got.Review)
}
