package journal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

// v1Journal copies the format version 1 journal of testdata/v1 (written by
// the release before the version 2 layout, see its README) into a fresh
// directory, and returns its path and the records that release read from
// it.
func v1Journal(t testing.TB) (string, []*journal.Record) { return oldJournal(t, "v1") }

// oldJournal copies testdata/<version>/journal.db into a fresh directory
// and returns its path and the records of testdata/<version>/records.json.
func oldJournal(t testing.TB, version string) (string, []*journal.Record) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", version, "journal.db"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), version+".journal")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	dump, err := os.ReadFile(filepath.Join("testdata", version, "records.json"))
	require.NoError(t, err)
	var want []*journal.Record
	require.NoError(t, json.Unmarshal(dump, &want))
	require.Len(t, want, 386, "records in testdata/%s", version)
	return path, want
}

// requireRecords checks that s holds exactly want, through List and Get.
func requireRecords(t testing.TB, s *journal.Store, want []*journal.Record) {
	t.Helper()
	ctx := context.Background()
	got, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Equal(t, want, got, "List() after migration")
	for _, w := range want {
		g, err := s.Get(ctx, w.Scope, w.Key)
		require.NoError(t, err)
		require.Equal(t, w, g, "Get(%q, %q)", w.Scope, w.Key)
	}
}

func TestOpenMigratesFormatVersion1(t *testing.T) {
	path, want := v1Journal(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	_, err = journal.Open(path, journal.ReadOnly())
	require.ErrorIs(t, err, journal.ErrOldFormat, "read-only Open() of a version 1 file")
	require.ErrorIs(t, journal.Check(path), journal.ErrOldFormat)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a read-only Open() changed the version 1 file")

	s, err := journal.Open(path)
	require.NoError(t, err, "Open() for writing migrates")
	requireRecords(t, s, want)

	// The migrated journal works as a new one: the old keys are taken, open
	// records settle, new ones come and go, Prune drops what settled.
	ctx := context.Background()
	_, err = s.Create(ctx, want[0])
	require.ErrorIs(t, err, journal.ErrExists, "Create() of a migrated key")
	open, err := s.List(ctx, journal.Filter{Open: true})
	require.NoError(t, err)
	require.Len(t, open, 200)
	due, err := s.Due(ctx, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	require.NoError(t, err)
	require.Len(t, due, 200, "Due() finds every migrated open record")
	settleAt := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	_, err = s.Update(ctx, open[0].Scope, open[0].Key, func(r *journal.Record) error {
		r.State, r.Settled, r.Updated = journal.StateSucceeded, settleAt, settleAt
		return nil
	})
	require.NoError(t, err)
	n, err := s.Prune(ctx, settleAt.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 187, n, "Prune() deletes every settled record, migrated or not")
	_, err = s.Get(ctx, open[0].Scope, open[0].Key)
	require.ErrorIs(t, err, journal.ErrNotFound, "pruned")
	_, err = s.Create(ctx, open[0])
	require.NoError(t, err, "a pruned key is free again")
	require.NoError(t, s.Close())
	require.NoError(t, journal.Check(path))
	require.NoError(t, journal.CheckFile(path))
}

func TestMigratedFileReadsBackAfterReopen(t *testing.T) {
	path, want := v1Journal(t)
	s, err := journal.Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = journal.Open(path, journal.ReadOnly())
	require.NoError(t, err, "a migrated file opens read-only")
	defer s.Close()
	requireRecords(t, s, want)
}

func TestCompactMigratesFormatVersion1(t *testing.T) {
	path, want := v1Journal(t)
	_, err := journal.Compact(path)
	require.NoError(t, err)
	require.NoError(t, journal.Check(path))
	s, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	requireRecords(t, s, want)
	require.NoError(t, s.Close())

	// The compacted copy keeps the sequence counter: new records never
	// take an old record's place.
	s, err = journal.Open(path)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	for i := range 10 {
		r := *want[0]
		r.Key = fmt.Sprintf("after-compact-%d", i)
		_, err := s.Create(ctx, &r)
		require.NoError(t, err)
	}
	for _, w := range want {
		g, err := s.Get(ctx, w.Scope, w.Key)
		require.NoError(t, err)
		require.Equal(t, w, g, "Get(%q, %q) after new records", w.Scope, w.Key)
	}
	got, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Len(t, got, len(want)+10, "old and new records")
}

// TestFailedMigrationLeavesTheFile: the migration is one bbolt
// transaction; one that fails (here on a damaged record, the last thing
// it could meet) leaves the version 1 file byte for byte as it was.
func TestFailedMigrationLeavesTheFile(t *testing.T) {
	path, _ := v1Journal(t)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("done")).Put([]byte("zzz\x00last"), []byte("not a record"))
	}))
	require.NoError(t, db.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	_, err = journal.Open(path)
	require.ErrorIs(t, err, journal.ErrCorrupt, "Open() of a damaged version 1 file")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a failed migration changed the file")
	_, err = journal.Open(path, journal.ReadOnly())
	require.ErrorIs(t, err, journal.ErrOldFormat, "still version 1")
}

// v2Journal is v1Journal for the format version 2 journal of testdata/v2
// (written by the last release without a log, see its README).
func v2Journal(t testing.TB) (string, []*journal.Record) { return oldJournal(t, "v2") }

// formatOf reads the format version of the journal file at path.
func formatOf(t testing.TB, path string) byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	var v byte
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		v = tx.Bucket([]byte("meta")).Get([]byte("version"))[0]
		return nil
	}))
	return v
}

// TestOpenMigratesFormatVersion2: format version 3 is version 2's layout
// with a log beside it. A version 2 file reads as it is, read-only and
// unchanged; an Open for writing makes it version 3 (so that an older
// idem, which would not read the log, refuses it) with every record as it
// was, and it then takes writes like a new journal.
func TestOpenMigratesFormatVersion2(t *testing.T) {
	path, want := v2Journal(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, byte(2), formatOf(t, path))

	s, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err, "read-only Open() of a version 2 file")
	requireRecords(t, s, want)
	require.NoError(t, s.Close())
	require.NoError(t, journal.Check(path))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a read-only Open() changed the version 2 file")

	s, err = journal.Open(path)
	require.NoError(t, err, "Open() for writing migrates")
	requireRecords(t, s, want)
	ctx := context.Background()
	open, err := s.List(ctx, journal.Filter{Open: true})
	require.NoError(t, err)
	require.NotEmpty(t, open)
	settleAt := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	_, err = s.Update(ctx, open[0].Scope, open[0].Key, func(r *journal.Record) error {
		r.State, r.Settled, r.Updated = journal.StateSucceeded, settleAt, settleAt
		return nil
	})
	require.NoError(t, err)
	r := *want[0]
	r.Key = "after-migration"
	_, err = s.Create(ctx, &r)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, byte(journal.FormatVersion), formatOf(t, path))
	require.Equal(t, byte(3), formatOf(t, path))
	require.NoError(t, journal.Check(path))
	require.NoError(t, journal.CheckFile(path))

	s, err = journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	defer s.Close()
	got, err := s.Get(ctx, open[0].Scope, open[0].Key)
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, got.State)
	all, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Len(t, all, len(want)+1)
}
