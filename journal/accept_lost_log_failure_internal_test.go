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

// TestAcceptLostLogFailureSaysWhatToDo: an Open with AcceptLostLog starts
// the log the journal goes on with, then records it in the file. When
// either failed (a full disk, a disk error) the error said what failed
// and nothing of what to do; the operator, who had given AcceptLostLog
// knowingly, was left to guess whether to give it again, and whether
// the failure had lost more. Each now says.
func TestAcceptLostLogFailureSaysWhatToDo(t *testing.T) {
	lostLog := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "j.db")
		s, err := Open(path, withApplyDelay(time.Hour))
		require.NoError(t, err)
		_, err = s.Create(context.Background(), rvRecord("k", rvT0))
		require.NoError(t, err)
		s.crash(t)
		for _, seg := range segmentsOf(t, path) {
			require.NoError(t, os.Remove(seg))
		}
		_, err = Open(path)
		require.ErrorIs(t, err, ErrLogMissing, "the fixture")
		return path
	}
	t.Run("the new segment", func(t *testing.T) {
		path := lostLog(t)
		_, err := Open(path, AcceptLostLog(), optionFunc(func(c *config) {
			c.failLogWrite = func(header, written bool) error {
				if header && !written {
					return syscall.ENOSPC
				}
				return nil
			}
		}))
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.Contains(t, err.Error(), "has space, then open the journal again with AcceptLostLog", "what to do")
		require.Empty(t, segmentsOf(t, path), "a segment left behind")
		_, err = Open(path)
		require.ErrorIs(t, err, ErrLogMissing, "nothing recorded: the next Open without AcceptLostLog refuses")
	})
	t.Run("the commit that records it", func(t *testing.T) {
		path := lostLog(t)
		_, err := Open(path, AcceptLostLog(), withFailCommit(func(written bool) error {
			if !written {
				return syscall.EIO
			}
			return nil
		}))
		require.ErrorIs(t, err, syscall.EIO)
		require.Contains(t, err.Error(), "check the disk", "what to do")
		require.Contains(t, err.Error(), "then open the journal again", "what to do")
		require.Len(t, segmentsOf(t, path), 1, "the segment the journal goes on with")
		s, err := Open(path)
		require.NoError(t, err, "the next Open, as the error says")
		require.NoError(t, s.Close())
	})
}
