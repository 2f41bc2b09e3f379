package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncedFreelist reports whether the newest meta page of the file at path
// names a freelist page (false: the next Open rebuilds the freelist).
func syncedFreelist(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	m, ok, err := newestMeta(f, fi.Size())
	require.NoError(t, err)
	require.True(t, ok, "a valid meta page")
	return m.freelist != noFreelist
}

// TestLargeFreelistIsNotWrittenPerCommit: once pruning leaves more than
// freelistUnsyncAbove free pages, commits stop writing the freelist; a
// journal copied between two commits (what a crash leaves) opens, with
// every acknowledged record and its indexes, and checks out; Close writes
// the freelist again.
func TestLargeFreelistIsNotWrittenPerCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, WithUnsafeNoSync())
	require.NoError(t, err)
	const n = 12000 // 1 KiB bodies: two records a page
	for i := range n {
		key := fmt.Sprintf("old-%05d", i)
		_, err := s.Create(ctx, benchRecord(key, benchBody, benchSHA))
		require.NoError(t, err)
		_, err = s.Update(ctx, "acct_bench", key, settleRecord)
		require.NoError(t, err)
	}
	pruned, err := s.Prune(ctx, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, n, pruned)
	var keys []string
	for i := range 50 {
		key := fmt.Sprintf("new-%05d", i)
		_, err := s.Create(ctx, benchRecord(key, benchBody, benchSHA))
		require.NoError(t, err)
		keys = append(keys, key)
	}
	require.NoError(t, s.flush(), "a commit of the file")
	st := s.db.Stats()
	require.Greater(t, st.FreePageN+st.PendingPageN, freelistUnsyncAbove, "free pages after pruning")
	require.False(t, syncedFreelist(t, path), "commits with a large freelist skip writing it")

	// What a crash leaves: the file as of the last commit, never closed,
	// and its log (applied, it adds nothing; without it the file is
	// refused, ErrLogMissing).
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	require.NoError(t, os.WriteFile(crashed, data, 0o600))
	segs, err := filepath.Glob(path + logInfix + "*")
	require.NoError(t, err)
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(crashed+strings.TrimPrefix(seg, path), b, 0o600))
	}
	c, err := Open(crashed)
	require.NoError(t, err, "Open() rebuilds the freelist")
	for _, k := range keys {
		_, err := c.Get(ctx, "acct_bench", k)
		require.NoError(t, err, "acknowledged record %s after the crash", k)
	}
	_, err = c.Create(ctx, benchRecord("after-crash", benchBody, benchSHA))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, Check(crashed))

	require.NoError(t, s.Close())
	require.True(t, syncedFreelist(t, path), "Close() writes the freelist")
	require.NoError(t, Check(path))
}
