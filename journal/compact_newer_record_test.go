package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestPruneAndCompactKeepRecordsFromNewerIdem: after a rollback this
// build prunes and compacts a journal holding records a newer idem wrote,
// one open and one settled. check takes their index entries as they are,
// so a copy that lost the open one's due entry would still check out,
// and the newer idem, upgraded to again, would never find that operation
// due: an order left unconfirmed for good. Every entry of the journal's
// buckets naming them must come through byte for byte.
func TestPruneAndCompactKeepRecordsFromNewerIdem(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 4 {
		_, err := s.Create(ctx, journaltest.NewRecord("s", fmt.Sprintf("k%d", i), t0))
		require.NoError(t, err)
	}
	for _, k := range []string{"k1", "k2"} {
		_, err := s.Update(ctx, "s", k, func(r *journal.Record) error {
			r.State, r.Settled = journal.StateSucceeded, t0
			return nil
		})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	// k0 open and k1 settled, as a newer idem wrote them.
	buckets := []string{"keys", "open.seq", "done.seq", "due.seq", "settled.seq"}
	dump := func(db *bolt.DB, seqs map[string]bool) map[string]string {
		out := map[string]string{}
		require.NoError(t, db.View(func(tx *bolt.Tx) error {
			for _, name := range buckets {
				require.NoError(t, tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
					sk := k
					switch name {
					case "keys":
						sk = v
					case "due.seq", "settled.seq":
						sk = k[len(k)-8:]
					}
					if seqs[string(sk)] {
						out[name+"/"+string(k)] = string(v)
					}
					return nil
				}))
			}
			return nil
		}))
		return out
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	newer := map[string]bool{}
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for _, k := range []string{"k0", "k1"} {
			newer[string(makeNewerIn(t, tx, k))] = true
		}
		return nil
	}))
	before := dump(db, newer)
	require.NoError(t, db.Close())
	// Each record's key entry, its record, and its due or settled entry.
	require.Len(t, before, 6)

	s, err = journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	n, err := s.Prune(ctx, t0.Add(365*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n, "k2 alone")
	require.NoError(t, s.Close())
	_, err = journal.Compact(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	rep, err := journal.Inspect(path)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Newer)
	require.Equal(t, []journal.Position{{Scope: "s", Key: "k0"}, {Scope: "s", Key: "k1"}}, rep.NewerAt, "named: no List shows them")
	require.Equal(t, 3, rep.Records)

	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, before, dump(db, newer))
}

// TestCheckFindsLostIndexEntryOfRecordFromNewerIdem: check cannot read a
// record a newer idem wrote, but its bucket says whether it is open, and
// an open record must have one due entry (a settled one, one settled
// entry) and one key entry, whatever its version. check took them as they
// were: a journal whose open record from a newer idem had lost its due
// entry checked out, and Compact carried it on, so the newer idem,
// upgraded to again, would never find that operation due, and nothing
// said so.
func TestCheckFindsLostIndexEntryOfRecordFromNewerIdem(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name, lose string // the index the record's entry is deleted from
		settled    bool
		want       string
	}{
		{"open, due entry lost", "due.seq", false, "missing its due.seq entry"},
		{"open, key entry lost", "keys", false, "missing its key entry"},
		{"settled, settled entry lost", "settled.seq", true, "missing its settled.seq entry"},
		{"intact", "", false, ""},
		{"settled intact", "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			s, err := journal.Open(path, journal.WithUnsafeNoSync())
			require.NoError(t, err)
			for _, k := range []string{"k0", "k1"} {
				_, err := s.Create(ctx, journaltest.NewRecord("s", k, t0))
				require.NoError(t, err)
			}
			if tc.settled {
				_, err := s.Update(ctx, "s", "k0", func(r *journal.Record) error {
					r.State, r.Settled = journal.StateSucceeded, t0
					return nil
				})
				require.NoError(t, err)
			}
			require.NoError(t, s.Close())

			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			require.NoError(t, err)
			require.NoError(t, db.Update(func(tx *bolt.Tx) error {
				sk := makeNewerIn(t, tx, "k0")
				switch tc.lose {
				case "keys":
					return tx.Bucket([]byte("keys")).Delete([]byte("s\x00k0"))
				case "due.seq", "settled.seq":
					c := tx.Bucket([]byte(tc.lose)).Cursor()
					for k, _ := c.First(); k != nil; k, _ = c.Next() {
						if bytes.HasSuffix(k, sk) {
							return c.Delete()
						}
					}
					t.Fatalf("no %s entry", tc.lose)
				}
				return nil
			}))
			require.NoError(t, db.Close())

			rep, err := journal.Inspect(path)
			require.Equal(t, 1, rep.Newer)
			if tc.want == "" {
				require.NoError(t, err)
				require.Empty(t, rep.Problems)
				return
			}
			require.ErrorIs(t, err, journal.ErrCorrupt)
			require.Len(t, rep.Problems, 1, "%q", rep.Problems)
			require.Contains(t, rep.Problems[0], tc.want)
			_, err = journal.Compact(path, journal.WithUnsafeNoSync())
			require.ErrorIs(t, err, journal.ErrCorrupt, "left as it is")
		})
	}
}

// makeNewerIn makes the record of key, in scope "s", one a newer idem
// wrote, as a rollback leaves it (its version byte above this build's),
// and returns its sequence key.
func makeNewerIn(t *testing.T, tx *bolt.Tx, key string) []byte {
	t.Helper()
	sk := bytes.Clone(tx.Bucket([]byte("keys")).Get([]byte("s\x00" + key)))
	require.NotNil(t, sk, key)
	for _, name := range []string{"open.seq", "done.seq"} {
		b := tx.Bucket([]byte(name))
		if v := b.Get(sk); v != nil {
			v = bytes.Clone(v)
			v[2] = journal.RecordVersion + 1
			require.NoError(t, b.Put(sk, v))
			return sk
		}
	}
	t.Fatalf("no record for %s", key)
	return nil
}
