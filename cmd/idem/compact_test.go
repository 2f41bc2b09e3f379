package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

func TestCheckAndCompact(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "check", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "ok")
	before, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)

	stdout, stderr, code = runIdem(t, "compact", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "compacted")
	after, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, before, after, "a record after compact")

	// The application holds the lock: both say so and change nothing.
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	defer s.Close()
	for _, cmd := range []string{"check", "compact"} {
		start := time.Now()
		_, stderr, code = runIdem(t, cmd, "-journal", f.path, "-lock-timeout", "100ms")
		require.Equal(t, 1, code, cmd)
		require.Contains(t, stderr, "locked by another process", cmd)
		require.Less(t, time.Since(start), 10*time.Second, cmd)
	}
}

// TestCheckJSON: check -json prints one object with the documented fields,
// also for a journal that does not check out (and then exits 1).
func TestCheckJSON(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "check", "-json", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	fi, err := os.Stat(f.path)
	require.NoError(t, err)
	require.Equal(t, []string{"file_size", "journal", "logged", "newer_keys", "newer_records", "ok", "pages", "problems", "records"}, slices.Sorted(maps.Keys(got)))
	require.Equal(t, f.path, got["journal"])
	require.Equal(t, true, got["ok"])
	require.Equal(t, []any{}, got["problems"])
	require.Equal(t, []any{}, got["newer_keys"])
	require.Equal(t, float64(fi.Size()), got["file_size"])
	require.Equal(t, float64(6), got["records"], "the fixture's operations")
	require.Positive(t, got["pages"])
	require.Equal(t, float64(0), got["logged"], "a journal closed cleanly")

	// Lose an index entry behind the journal's back.
	db, err := bolt.Open(f.path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("due.seq")).Cursor()
		k, _ := c.First()
		require.NotNil(t, k)
		return c.Delete()
	}))
	require.NoError(t, db.Close())
	stdout, stderr, code = runIdem(t, "check", "-json", "-journal", f.path)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stderr, "damaged")
	var bad checkJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &bad), stdout)
	require.False(t, bad.OK)
	require.Len(t, bad.Problems, 1)
	require.Contains(t, bad.Problems[0], "missing index entry")
	require.Equal(t, 6, bad.Records)

	// A journal it cannot check at all: no JSON, the error on stderr.
	stdout, stderr, code = runIdem(t, "check", "-json", "-journal", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "does not exist")
}

// TestCompactJSON: compact -json prints the sizes before and after.
func TestCompactJSON(t *testing.T) {
	path := settledJournal(t, 2000)
	s, err := journal.Open(path)
	require.NoError(t, err)
	n, err := s.Prune(context.Background(), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2000, n)
	require.NoError(t, s.Close())
	before, err := os.Stat(path)
	require.NoError(t, err)

	stdout, stderr, code := runIdem(t, "compact", "-json", "-journal", path)
	require.Equal(t, 0, code, stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, []string{"after", "before", "journal", "saved"}, slices.Sorted(maps.Keys(got)))
	after, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, path, got["journal"])
	require.Equal(t, float64(before.Size()), got["before"])
	require.Equal(t, float64(after.Size()), got["after"])
	require.Equal(t, float64(before.Size()-after.Size()), got["saved"])
	require.Less(t, after.Size(), before.Size(), "pruned pages given back")
}

// TestCheckJSONAfterFailedWrite: a journal whose write failed (the
// application's fsync reported EIO, which left the .write-failed marker)
// may show pages the disk does not hold. check -json says so in its
// object, as for any journal that does not check out, for the monitoring
// that reads it: an error on stderr alone gave it nothing to parse.
func TestCheckJSONAfterFailedWrite(t *testing.T) {
	f := newJournal(t)
	require.NoError(t, os.WriteFile(f.path+".write-failed", []byte("2026-12-05T00:00:00Z journal: commit: fdatasync: input/output error\n"), 0o600))
	stdout, stderr, code := runIdem(t, "check", "-json", "-journal", f.path)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stderr, "open it for writing")
	var bad checkJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &bad), "stdout %q, stderr %q", stdout, stderr)
	require.False(t, bad.OK)
	require.Len(t, bad.Problems, 1)
	require.Contains(t, bad.Problems[0], "may not hold")
	require.Equal(t, 6, bad.Records)
}
