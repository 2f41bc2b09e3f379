package journal_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// oldImage reads the old-format journal at path: a read-only Store
// refuses a version 1 file, so imageOf cannot.
func oldImage(t *testing.T, path string, want []*journal.Record) journalImage {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	img := journalImage{data: data, used: journal.UsedBytes(data)}
	require.Positive(t, img.used, "a valid meta page")
	for _, r := range want {
		img.keys = append(img.keys, r.Scope+"\x00"+r.Key)
	}
	return img
}

// TestFlippedBytesMigrateOrFailClosed: the migration of a format version 1
// or 2 file, with a few bytes anywhere set to random values, either fails
// with ErrCorrupt (or ErrVersion, for a damaged version byte) and leaves
// the file byte for byte as it was, or succeeds, because the damage lay
// where the migration never reads, into a file that checks out and holds
// every operation of the old one. It never panics or faults (the
// migration's write transaction had no recovery: a damaged page killed
// the process that opened the file).
func TestFlippedBytesMigrateOrFailClosed(t *testing.T) {
	cases := 150
	if testing.Short() {
		cases = 30
	}
	for v, version := range []string{"v1", "v2"} {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			src, want := oldJournal(t, version)
			img := oldImage(t, src, want)
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(13, uint64(v)))
			migrated := 0
			for i := range cases {
				path, what := flippedCopy(t, img, dir, i, rng)
				before, err := os.ReadFile(path)
				require.NoError(t, err)
				var got []string
				err = failsClosed(func() error {
					s, err := journal.Open(path, journal.WithUnsafeNoSync())
					if err != nil {
						return err
					}
					recs, err := s.List(ctx, journal.Filter{})
					for _, r := range recs {
						got = append(got, r.Scope+"\x00"+r.Key)
					}
					if cerr := s.Close(); err == nil {
						err = cerr
					}
					return err
				})
				if err != nil {
					if !damagedOK(err) {
						t.Fatalf("%s: Open for writing: %v", what, err)
					}
					after, rerr := os.ReadFile(path)
					require.NoError(t, rerr)
					require.True(t, bytes.Equal(before, after), "%s: a failed migration changed the file", what)
					continue
				}
				migrated++
				require.NoError(t, journal.Check(path), "%s: the migrated file", what)
				require.ElementsMatch(t, img.keys, got, "%s: the operations of the migrated file", what)
			}
			t.Logf("%d of %d damaged copies migrated, the others refused", migrated, cases)
		})
	}
}
