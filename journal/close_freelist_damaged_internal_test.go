package journal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Close's commit of the free-page list failing with nothing written said
// "the journal is intact", true of a failed write or a full disk, but not
// when bbolt panicked on the file's pages (updateRecovered's ErrCorrupt),
// as it does on a damaged file: an operator told "intact" opens it again
// instead of keeping a copy and checking it.
func TestCloseFreelistCommitOnDamagedPagesIsNotIntact(t *testing.T) {
	err := closeResult(nil, withKind(ErrCorrupt, "bbolt panicked in go.etcd.io/bbolt.(*Tx).Commit: runtime error: index out of range [9] with length 4 (as it does on a damaged page)"), false)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotContains(t, err.Error(), "intact")
	require.Contains(t, err.Error(), "idem check", "what to do")
	require.True(t, strings.HasPrefix(err.Error(), "journal: close: "), "%q", err.Error())
}
