package main

// A damaged or truncated journal makes every command exit with status 1
// and say so, never crash.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
		off = int(tx.Bucket([]byte("done.seq")).Root()) * ps
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

// settledJournal writes, through package journal, a journal of n settled
// orders (enough for several pages of each bucket, and free pages from
// the updates) and returns its path.
func settledJournal(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payments.journal")
	s, err := journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	for i := range n {
		body := []byte(fmt.Sprintf(`{"amount":%d}`, i))
		key := fmt.Sprintf("order-%04d", i)
		_, err := s.Create(ctx, &journal.Record{
			Scope: "default", Key: key, Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: body, BodySHA: sha256.Sum256(body), State: journal.StatePending,
			Created: now, Updated: now, NextDue: now,
		})
		require.NoError(t, err)
		_, err = s.Update(ctx, "default", key, func(r *journal.Record) error {
			r.State, r.Settled, r.Updated = journal.StateSucceeded, now, now
			return nil
		})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	return path
}

// requireExitOne checks that a command run by runIdemProcess on a damaged
// journal ended with status 1 and a message, not a crash.
func requireExitOne(t *testing.T, args []string, stdout, stderr string, code int) {
	t.Helper()
	// "panic:" as a crash prints it: the message of a recovered one
	// says where bbolt "panicked", which is no crash.
	for _, crash := range []string{"panic:", "fatal error", "goroutine ", "SIG"} {
		require.NotContains(t, stderr, crash, "idem %q crashed", args)
	}
	require.Equal(t, 1, code, "idem %q: exit status; stdout:\n%s\nstderr:\n%s", args, stdout, stderr)
	require.Contains(t, stderr, "keep a copy of it before anything else touches it", "idem %q", args)
}

// TestTruncatedJournalExitsOne: issue 10, item 5. `head -c 98304
// demo.journal > t.journal; idem -journal t.journal check` died with
// SIGBUS (so did stats and list): bbolt mapped the short file and read a
// page past its end. Each command, run as a process of its own on copies
// of a journal cut at every 4 KiB boundary below its last commit's size
// and at odd lengths, exits with status 1 and says the journal is
// truncated.
func TestTruncatedJournalExitsOne(t *testing.T) {
	path := settledJournal(t, 150)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	var used int
	require.NoError(t, db.View(func(tx *bolt.Tx) error { used = int(tx.Size()); return nil }))
	require.NoError(t, db.Close())

	cuts := []int{1, 4095, 8191, used - 1}
	for n := 4096; n < used; n += 4096 {
		cuts = append(cuts, n, n+1234)
	}
	slices.Sort(cuts)
	dir := t.TempDir()
	for _, n := range cuts {
		if n <= 0 || n >= used {
			continue
		}
		cut := filepath.Join(dir, fmt.Sprintf("cut-%d.journal", n))
		require.NoError(t, os.WriteFile(cut, data[:n], 0o600))
		for _, cmd := range []string{"check", "stats", "list"} {
			args := []string{"-journal", cut, cmd}
			stdout, stderr, code := runIdemProcess(t, args...)
			requireExitOne(t, args, stdout, stderr, code)
			if n >= 2*4096 {
				require.Contains(t, stderr, "truncated", "idem %q", args)
			}
		}
	}
}

// TestFlippedBytesExitZeroOrOne: random damage anywhere in a journal (a
// few bytes set to random values) never crashes check, stats or list:
// each exits with status 0 (the damage hit an unused page, or went
// unnoticed by a command that does not read it) or 1, with a message.
// When check passes, stats and list do too.
func TestFlippedBytesExitZeroOrOne(t *testing.T) {
	path := settledJournal(t, 150)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 150 {
		damaged := bytes.Clone(data)
		for range 1 + rng.IntN(3) {
			damaged[rng.IntN(len(damaged))] ^= byte(1 + rng.IntN(255))
		}
		flipped := filepath.Join(dir, fmt.Sprintf("flip-%d.journal", i))
		require.NoError(t, os.WriteFile(flipped, damaged, 0o600))
		codes := map[string]int{}
		newer, named, noted := false, false, false
		for _, cmd := range []string{"check", "stats", "list"} {
			args := []string{"-journal", flipped, cmd}
			stdout, stderr, code := runIdemProcess(t, args...)
			switch cmd {
			case "check":
				newer = strings.Contains(stdout, "written by a newer idem")
				named = regexp.MustCompile(`(?m)^    default/order-\d+$`).MatchString(stdout)
			case "list":
				noted = strings.Contains(stderr, "written by a newer idem are not listed")
			}
			// A flip of a record's version byte to a higher number is
			// exactly a record written by a newer idem: exit 1 with the
			// upgrade hint, not the damage one.
			if code != 0 && !(code == 1 && strings.Contains(stderr, "record format version") && strings.Contains(stderr, "hint: use the idem command")) {
				requireExitOne(t, args, stdout, stderr, code)
			}
			codes[cmd] = code
		}
		switch {
		case codes["check"] == 0 && newer:
			// Check counts such a record apart, as it does one a newer
			// idem wrote (it cannot tell them apart), and names it;
			// list leaves it out, as it leaves out a newer idem's, and
			// says so on stderr. This expected list to fail, as it did before it
			// skipped such records: the test failed whenever the random
			// damage hit a version byte, which the journal's layout (its
			// records' times) decided.
			require.Equal(t, map[string]int{"check": 0, "stats": 0, "list": 0}, codes, "case %d: check passed", i)
			require.True(t, named, "case %d: check names the record", i)
			require.True(t, noted, "case %d: list says a record is not listed", i)
		case codes["check"] == 0:
			require.Equal(t, map[string]int{"check": 0, "stats": 0, "list": 0}, codes, "case %d: check passed", i)
		}
	}
}
