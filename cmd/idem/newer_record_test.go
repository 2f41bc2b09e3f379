package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

// makeNewer makes the record of key in scope "default" one written by a
// newer idem, as a rollback leaves it: its record version byte above this
// build's.
func makeNewer(t *testing.T, path, key string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		sk := tx.Bucket([]byte("keys")).Get([]byte("default\x00" + key))
		require.NotNil(t, sk, key)
		for _, name := range []string{"open.seq", "done.seq"} {
			b := tx.Bucket([]byte(name))
			if v := b.Get(sk); v != nil {
				v = append([]byte(nil), v...)
				v[2] = journal.RecordVersion + 1
				return b.Put(sk, v)
			}
		}
		t.Fatalf("no record for %s", key)
		return nil
	}))
}

// TestStatsCountsRecordsFromNewerIdem: after a rollback, idem stats
// failed with ErrVersion on the first record a newer idem wrote, so the
// operator saw no counts at all, and idem check called the journal
// damaged (stray index entries) and said to keep a copy of it. Both count
// such records apart (their state is unreadable), with what that means;
// idem list stays loud, naming the record and the idem command that
// reads it.
func TestStatsAndCheckCountRecordsFromNewerIdem(t *testing.T) {
	f := newJournal(t)
	makeNewer(t, f.path, "k-pending")
	makeNewer(t, f.path, "k-binary")

	stdout, stderr, code := runIdem(t, "stats", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^  by a newer idem\s+2$`, stdout)
	require.Regexp(t, `(?m)^  total\s+6$`, stdout)
	require.Regexp(t, `(?m)^  pending\s+0$`, stdout)
	require.Contains(t, stdout, "idem was rolled back")

	stdout, stderr, code = runIdem(t, "stats", "-journal", f.path, "-json")
	require.Equal(t, 0, code, stderr)
	var got struct {
		Newer int `json:"newer_records"`
		Total int `json:"total"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, 2, got.Newer)
	require.Equal(t, 6, got.Total)

	stdout, stderr, code = runIdem(t, "check", "-journal", f.path)
	require.Equal(t, 0, code, "not damage: %s", stderr)
	require.Contains(t, stdout, "of which 2 written by a newer idem")
	stdout, stderr, code = runIdem(t, "check", "-journal", f.path, "-json")
	require.Equal(t, 0, code, stderr)
	got.Newer = 0
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, 2, got.Newer)

	// Compact checks its copy as check does: it keeps them.
	_, stderr, code = runIdem(t, "compact", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code = runIdem(t, "check", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "of which 2 written by a newer idem")

	_, stderr, code = runIdem(t, "list", "-journal", f.path)
	require.Equal(t, 1, code)
	t.Log(stderr)
	require.Contains(t, stderr, "written by a newer idem")
	require.Contains(t, stderr, "after a rollback, the one it was rolled back from")
}
