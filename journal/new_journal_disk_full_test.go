//go:build linux

package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNewJournalOnAFullDisk: a service's first start on a volume that is
// full, or all but (other files' logs filled it), fails; once space is
// freed, the next start makes the journal. bbolt creates a journal with
// one write of four pages (DB.init) and, on a disk with one to three
// pages free, that write stopped part way (write(2) writes what fits,
// then ENOSPC): the file left behind was refused at every later start as
// truncated, with advice to restore a complete copy of a journal that
// never held anything. A small tmpfs is the full disk.
func TestNewJournalOnAFullDisk(t *testing.T) {
	ctx := context.Background()
	for free := range int64(6) {
		t.Run(string(rune('0'+free))+" pages free", func(t *testing.T) {
			dir := t.TempDir()
			filler := fullTmpfs(t, dir, "", free)

			path := filepath.Join(dir, "j.db")
			s, err := Open(path)
			if err == nil {
				// Room enough for bbolt's four pages: a start that gets
				// this far has the journal, or fails later, cleanly.
				_, cerr := s.Create(ctx, newRecord("first"))
				require.NoError(t, s.Close(), "Close after Create: %v", cerr)
			} else {
				require.ErrorIs(t, err, syscall.ENOSPC)
				require.NotErrorIs(t, err, ErrCorrupt)
			}

			require.NoError(t, os.Remove(filler))
			s, err = Open(path)
			require.NoError(t, err, "the start after the disk was freed")
			_, err = s.Create(ctx, newRecord("k"))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			s, err = Open(path)
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Get(ctx, "s", "k")
			require.NoError(t, err)
		})
	}
}

// fullTmpfs mounts on dir a tmpfs of 1 MiB, with the mount options opts
// (comma-separated, may be empty) besides, and fills it but for free
// pages with the file it returns, skipping t where mounting is refused.
func fullTmpfs(t *testing.T, dir, opts string, free int64) (filler string) {
	t.Helper()
	if opts != "" {
		opts += ","
	}
	mountOrSkip(t, "tmpfs", dir, "tmpfs", 0, opts+"size=1m,mode=0700")
	filler = filepath.Join(dir, "filler")
	fillDisk(t, filler)
	fi, err := os.Stat(filler)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(filler, fi.Size()-free*int64(os.Getpagesize())))
	return filler
}

// fillDisk writes the file at path until its file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "filling: %v", err)
			return
		}
	}
}
