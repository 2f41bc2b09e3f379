package journal

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// withFailOpenCommit sets failOpenCommit: fail stands in for the
// fdatasync of each commit Open makes before a Store exists.
func withFailOpenCommit(fail func() error) Option {
	return optionFunc(func(c *config) { c.failOpenCommit = fail })
}

// TestOpenCommitFailedLeavesMarker: Open commits to the file before a
// Store exists, and without one's failure handling (commitBolt): bbolt's
// first pages of a new file (in bolt.Open), a new journal's metadata
// (initMeta), a migration of an older format, the freelist the last
// commit skipped (flushFreelist). When such a commit's
// fdatasync failed, Linux marked its pages clean, unwritten: Open
// returned the error, but left no marker, and the next Open, in the same
// boot, read the commit back from memory as if it were on disk and built
// on it. A reboot later the file named pages the disk never held: a
// migrated journal's whole tree, or a new journal without the id its log
// segments carry. Each commit's failure now leaves the marker, and the
// next Open writes the journal again and syncs it before it trusts it, or
// refuses while the disk still fails.
func TestOpenCommitFailedLeavesMarker(t *testing.T) {
	tests := []struct {
		name    string
		fixture func(t *testing.T, path string)
		seam    func(fail func() error) Option // withFailOpenCommit if nil
	}{
		{name: "bbolt's first pages", fixture: func(*testing.T, string) {}, seam: func(fail func() error) Option {
			return optionFunc(func(c *config) { c.failInit = fail })
		}},
		{name: "a new journal's metadata", fixture: func(*testing.T, string) {}},
		{name: "a migration", fixture: func(t *testing.T, path string) {
			data, err := os.ReadFile(filepath.Join("testdata", "v2", "journal.db"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data, 0o600))
		}},
		{name: "the freelist the last commit skipped", fixture: freelistSkipped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			tt.fixture(t, path)
			seam := tt.seam
			if seam == nil {
				seam = withFailOpenCommit
			}
			commits := 0
			_, err := Open(path, seam(func() error {
				commits++
				return syscall.EIO
			}))
			require.ErrorIs(t, err, syscall.EIO)
			require.Equal(t, 1, commits, "Open's commits")
			require.Equal(t, 1, strings.Count(err.Error(), "check the disk"), "what to do, said once: %v", err)
			require.NotContains(t, err.Error(), "unchanged")
			if tt.seam == nil {
				require.ErrorIs(t, err, ErrFileFailed, "the commit may not be on disk")
			}
			marker, err := os.ReadFile(path + writeFailedSuffix)
			require.NoError(t, err, "the marker of the failed write")
			require.Contains(t, string(marker), syscall.EIO.Error())

			// A reader of a journal is warned (bbolt's first pages are
			// none yet); a writer does not trust what memory shows while
			// the disk still fails.
			if tt.seam == nil {
				_, err = Inspect(path)
				require.ErrorIs(t, err, ErrFileFailed, "Inspect after the failed commit")
			}
			_, err = Open(path, withFailSync(func(p string) error {
				if p == path {
					return syscall.EIO
				}
				return nil
			}))
			require.ErrorIs(t, err, syscall.EIO, "Open over the failed commit, the disk still failing")
			require.FileExists(t, path+writeFailedSuffix)

			requireWrittenAgain(t, path, segmentsOf(t, path))
			require.NoError(t, Check(path))
		})
	}
}
