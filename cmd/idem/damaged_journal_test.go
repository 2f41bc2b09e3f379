package main

// A damaged or truncated journal makes every command exit with status 1
// and say so, never crash.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

// TestDamagedJournalExitsOne: doc.go says exit status 1 for a
// damaged journal, with the hint to keep a copy. A journal with one bad
// page opened fine, and then list, stats and show crashed the command with
// a bbolt panic and a stack trace (exit status 2, which the doc reserves
// for usage errors), check could fault or run out of memory, and compact
// could fault half-way. Fixed in package journal (readDamaged,
// pageHeaders).
func TestDamagedJournalExitsOne(t *testing.T) {
	f := newJournal(t)
	// Pad the settled records out of the root's inline page, so the
	// damage below hits a page of their own.
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	for i := range 400 {
		body := []byte(fmt.Sprintf(`{"amount":%d,"pad":%q}`, i, strings.Repeat("x", 100)))
		_, err := s.Create(context.Background(), &journal.Record{
			Scope: "default", Key: fmt.Sprintf("pad-%03d", i), Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: body, BodySHA: sha256.Sum256(body), State: journal.StateSucceeded,
			Created: f.now, Updated: f.now, Settled: f.now,
		})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	// The page holding the first settled records now claims to be
	// another page, as a misdirected write would leave it.
	db, err := bolt.Open(f.path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	var off int
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		ps := tx.DB().Info().PageSize
		data, err := os.ReadFile(f.path)
		require.NoError(t, err)
		off = int(tx.Bucket([]byte("done")).Root()) * ps
		for binary.LittleEndian.Uint16(data[off+8:off+10])&0x01 != 0 {
			off = int(binary.LittleEndian.Uint64(data[off+24:off+32])) * ps
		}
		return nil
	}))
	require.NoError(t, db.Close())
	require.NotZero(t, off)
	data, err := os.ReadFile(f.path)
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(data[off:off+8], 999999)
	require.NoError(t, os.WriteFile(f.path, data, 0o600))

	for _, args := range [][]string{{"list"}, {"stats"}, {"show", "k-succeeded"}, {"check"}, {"compact"}} {
		t.Run(args[0], func(t *testing.T) {
			var (
				stdout, stderr string
				code           int
			)
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("idem %q panicked: %v", args, p)
					}
				}()
				stdout, stderr, code = runIdem(t, append(args, "-journal", f.path)...)
			}()
			require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stderr, "damaged")
			require.Contains(t, stderr, "keep a copy of it before anything else touches it")
		})
	}
	after, err := os.ReadFile(f.path)
	require.NoError(t, err)
	require.Equal(t, data, after, "the damaged journal was changed")
}
