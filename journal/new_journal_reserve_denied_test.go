//go:build linux

package journal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// withFallocate makes Open call fallocate in place of fallocate(2) as it
// reserves a new journal's first pages.
func withFallocate(fallocate fallocateFunc) Option {
	return optionFunc(func(c *config) { c.fallocate = fallocate })
}

// TestNewJournalWhereSpaceCannotBeReserved: Open reserves a new journal's
// first pages with fallocate(2) before bbolt writes them (so that a full
// disk fails the first start with nothing written). An error that says the
// call cannot reserve, rather than that the disk is full, must not fail the
// start: a seccomp filter denies it with EPERM (Docker's and containerd's
// default profiles return EPERM for a syscall they block; gVisor's for one
// it does not implement), a file system without it answers EOPNOTSUPP
// (ENOTSUP, the same errno on Linux) or EINVAL, an old kernel ENOSYS. EPERM
// failed the start, saying to free space on a disk that had room. Only
// ENOSPC and EDQUOT say the disk is full; another error (EIO) fails the
// start without that advice. Whatever the answer, nothing is written, and
// the next start with a working fallocate makes the journal.
func TestNewJournalWhereSpaceCannotBeReserved(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		errno syscall.Errno
		full  bool // the start fails, telling to free space
		fails bool // the start fails, not telling to free space
	}{
		{"seccomp EPERM", syscall.EPERM, false, false},
		{"no syscall ENOSYS", syscall.ENOSYS, false, false},
		{"file system EOPNOTSUPP", syscall.EOPNOTSUPP, false, false},
		{"file system ENOTSUP", syscall.ENOTSUP, false, false},
		{"file system EINVAL", syscall.EINVAL, false, false},
		{"disk full ENOSPC", syscall.ENOSPC, true, false},
		{"quota EDQUOT", syscall.EDQUOT, true, false},
		{"I/O error EIO", syscall.EIO, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			var calls []int64
			s, err := Open(path, withFallocate(func(fd int, mode uint32, off, n int64) error {
				require.Equal(t, uint32(fallocKeepSize), mode, "fallocate's mode: the file's size kept")
				require.Zero(t, off)
				calls = append(calls, n)
				return tc.errno
			}))
			require.Equal(t, []int64{newFileSize}, calls, "fallocate calls: bbolt's four pages, once")
			if tc.full || tc.fails {
				require.ErrorIs(t, err, tc.errno)
				require.NotErrorIs(t, err, ErrCorrupt)
				require.Nil(t, s)
				require.Equal(t, tc.full, containsFreeSpace(err), "advice to free space in %q", err)
				fi, serr := os.Stat(path)
				if serr == nil {
					require.Zero(t, fi.Size(), "bytes written by the refused start")
				}
			} else {
				require.NoError(t, err, "a start where fallocate answers %v", tc.errno)
				_, err = s.Create(ctx, newRecord("first"))
				require.NoError(t, err)
				require.NoError(t, s.Close())
			}

			s, err = Open(path)
			require.NoError(t, err, "the next start")
			_, err = s.Create(ctx, newRecord("k"))
			require.NoError(t, err)
			_, err = s.Get(ctx, "s", "k")
			require.NoError(t, err)
			require.NoError(t, s.Close())
		})
	}
}

// A signal during fallocate(2) (EINTR) is no answer: the call is made
// again, and the journal made.
func TestNewJournalReserveInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	calls := 0
	s, err := Open(path, withFallocate(func(fd int, mode uint32, off, n int64) error {
		calls++
		if calls == 1 {
			return syscall.EINTR
		}
		return syscall.Fallocate(fd, mode, off, n)
	}))
	require.NoError(t, err)
	require.Equal(t, 2, calls, "fallocate calls: the interrupted one and its retry")
	require.NoError(t, s.Close())
}

func containsFreeSpace(err error) bool {
	return err != nil && strings.Contains(err.Error(), "free space")
}
