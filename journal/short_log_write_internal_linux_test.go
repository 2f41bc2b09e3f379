package journal

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fullDiskAt makes the active segment of s hold no more than limit bytes,
// as a disk that fills at that point does, and a new segment's header find
// no room, until the returned function is called: the process's file size
// limit (RLIMIT_FSIZE) cuts a pwrite short at limit and fails the rest with
// EFBIG, as a full disk does with ENOSPC at the page it has no room for and
// a quota with EDQUOT (write(2): fewer bytes than asked "if there is
// insufficient space on the underlying physical medium"). Go ignores the
// SIGXFSZ that comes with it.
func fullDiskAt(t *testing.T, s *Store, limit int64) (restore func()) {
	t.Helper()
	s.log.failWrite = func(header, written bool) error {
		if header && !written {
			return syscall.ENOSPC
		}
		return nil
	}
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim))
	cut := lim
	cut.Cur = uint64(limit)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &cut))
	restored := false
	restore = func() {
		if !restored {
			restored = true
			require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim))
		}
	}
	t.Cleanup(restore)
	return restore
}

// journalOfK0 opens a new journal, its log left unapplied, and creates
// "k0" in it.
func journalOfK0(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour))
	require.NoError(t, err)
	_, err = s.Create(context.Background(), rvRecord("k0", rvT0))
	require.NoError(t, err)
	return s, path
}

// roundOf returns how many bytes the round of a Create of rec takes in
// the log of a journalOfK0, without and with its padding: one is written
// for it and its last round read back.
func roundOf(t *testing.T, rec *Record) (body, padded int64) {
	t.Helper()
	m, _ := journalOfK0(t)
	at := m.log.size
	_, err := m.Create(context.Background(), rec)
	require.NoError(t, err)
	data, err := os.ReadFile(m.log.f.Name())
	require.NoError(t, err)
	m.crash(t)
	_, count, b, ok := roundAt(data[at:], &m.log.id)
	require.True(t, ok)
	require.Equal(t, 1, count)
	return roundHeaderSize + int64(len(b)), int64(len(data)) - at
}

// A full disk cut a round's write short: os.File.WriteAt returns 0, not
// the bytes written, when its pwrite wrote part of them and the next
// failed (the disk full at the next page), and the log took that for a
// write of which nothing reached the file. With the new segment that
// would void it failing too, the writers were told "nothing of this write
// was written", a plain error, which idem's Submit passes on as "nothing
// was journaled and nothing will be sent": its caller gives the order up,
// or places it again under a new key. But the write had stopped in
// the round's padding, past its last entry: the round was whole in the
// file, and a process killed before its next round (which starts a
// segment voiding it) left it there, so the next Open brought the
// operation back, due, and Resume sent it: an order the caller was told
// was never journaled, placed, perhaps twice.
func TestShortLogWriteIsMaybeCommitted(t *testing.T) {
	ctx := context.Background()
	s, path := journalOfK0(t)
	body, padded := roundOf(t, rvRecord("k1", rvT0))
	require.Greater(t, padded, body, "the round has padding to cut the write in")

	restore := fullDiskAt(t, s, s.log.size+body)
	_, err := s.Create(ctx, rvRecord("k1", rvT0))
	restore()
	require.ErrorIs(t, err, syscall.EFBIG)
	require.ErrorIs(t, err, ErrMaybeCommitted, "a write whose round is whole in the file")
	s.crash(t)

	s, err = Open(path)
	require.NoError(t, err)
	_, err = s.Get(ctx, "s", "k1")
	require.NoError(t, err, "the round, whole in the file, read back")
	require.NoError(t, s.Close())
}

// The bytes of a write cut short by a full disk are dirty in memory, as
// any write's, and no fsync failed: the kernel writes them back as ever,
// and a writeback that fails later is reported to the next Open's fsync
// (syncRecovered), on a descriptor of its own (fsync(2): an error not yet
// seen is reported to every descriptor). A round so cut, whose voiding
// segment failed too, left the marker of a failed fsync all the same, and
// the next Open wrote the whole journal file and its log again: minutes
// of start-up for a journal of gigabytes after a full disk, the commonest
// bad day, and on a copy-on-write file system (btrfs, ZFS) as much free
// space as the journal's size, without which the service did not start
// ("check the disk") though the operator had freed enough for it to run.
func TestShortLogWriteLeavesNoFailedSyncMarker(t *testing.T) {
	ctx := context.Background()
	s, path := journalOfK0(t)
	restore := fullDiskAt(t, s, s.log.size+16)
	_, err := s.Create(ctx, rvRecord("k1", rvT0))
	restore()
	require.ErrorIs(t, err, ErrMaybeCommitted)
	require.ErrorIs(t, err, syscall.EFBIG)
	s.crash(t)
	_, err = os.Stat(path + writeFailedSuffix)
	require.ErrorIs(t, err, os.ErrNotExist, "the marker of a failed fsync, none having failed")

	// Space freed, but not the journal's size: on a copy-on-write file
	// system, writing the file again fails for want of room.
	var synced []string
	s, err = Open(path, withFailSync(func(p string) error {
		synced = append(synced, p)
		if p == path {
			return syscall.ENOSPC
		}
		return nil
	}))
	require.NoError(t, err, "Open after a full disk, no fsync having failed")
	require.NotContains(t, synced, path, "the journal file written again")
	_, err = s.Get(ctx, "s", "k0")
	require.NoError(t, err)
	_, err = s.Get(ctx, "s", "k1")
	require.ErrorIs(t, err, ErrNotFound, "the round cut short")
	require.NoError(t, s.Close())
}
