package journal

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A journal's volume not mounted at start-up, or a path changed by a
// deploy, looks like a first start: Open created an empty journal, and the
// operations still open in the real one were never resumed. MustExist
// makes Open refuse instead, and leaves nothing behind.
func TestMustExistRefusesToCreate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	missing := filepath.Join(dir, "missing.db")
	_, err := Open(missing, MustExist())
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "volume mounted")
	require.ErrorContains(t, err, "open it once without MustExist")
	_, serr := os.Stat(missing)
	require.True(t, errors.Is(serr, fs.ErrNotExist), "Open created %s: %v", missing, serr)
	left, err := filepath.Glob(missing + "*")
	require.NoError(t, err)
	require.Empty(t, left, "no log segment either")

	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = Open(empty, MustExist())
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "an empty file")
	fi, err := os.Stat(empty)
	require.NoError(t, err)
	require.Zero(t, fi.Size(), "the empty file was made a journal")

	// A journal that exists opens as ever, its records there.
	real := filepath.Join(dir, "real.db")
	s, err := Open(real)
	require.NoError(t, err)
	_, err = s.Create(ctx, newRecord("open-1"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = Open(real, MustExist())
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "s", "open-1")
	require.NoError(t, err)
}
