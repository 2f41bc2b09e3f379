package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorMessagesNameThePackageOnce checks that the Store's errors say
// "journal: " once ("journal: update "k": closed", not "journal: update
// "k": journal: closed") and still match their sentinel.
func TestErrorMessagesNameThePackageOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "j.db"))
	require.NoError(t, err)
	_, err = s.Create(ctx, newRecord("k"))
	require.NoError(t, err)

	check := func(t *testing.T, err error, kind error) {
		t.Helper()
		require.ErrorIs(t, err, kind)
		t.Log(err)
		require.Equal(t, 1, strings.Count(err.Error(), "journal: "), "%q names the package more than once", err)
		require.Contains(t, err.Error(), strings.TrimPrefix(kind.Error(), "journal: "), "the kind is said")
	}
	t.Run("exists", func(t *testing.T) {
		_, err := s.Create(ctx, newRecord("k"))
		check(t, err, ErrExists)
	})
	t.Run("not found", func(t *testing.T) {
		_, err := s.Get(ctx, "s", "missing")
		check(t, err, ErrNotFound)
	})
	t.Run("invalid key", func(t *testing.T) {
		_, err := s.Get(ctx, "s", "")
		check(t, err, ErrInvalid)
	})
	t.Run("invalid resolution", func(t *testing.T) {
		_, err := s.Resolve(ctx, "s", "k", Manual{State: StateFailed})
		check(t, err, ErrInvalid)
	})
	t.Run("update refused", func(t *testing.T) {
		_, err := s.Update(ctx, "s", "k", func(*Record) error { return errors.New("refused") })
		require.EqualError(t, err, `journal: update "k": refused`)
	})
	require.NoError(t, s.Close())
	t.Run("closed", func(t *testing.T) {
		_, err := s.Update(ctx, "s", "k", func(*Record) error { return nil })
		check(t, err, ErrClosed)
	})
	t.Run("read-only", func(t *testing.T) {
		ro, err := Open(filepath.Join(dir, "j.db"), ReadOnly())
		require.NoError(t, err)
		defer ro.Close()
		_, err = ro.Create(ctx, newRecord("k2"))
		check(t, err, ErrReadOnly)
	})
	t.Run("empty file read-only", func(t *testing.T) {
		path := filepath.Join(dir, "empty.db")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		_, err := Open(path, ReadOnly())
		require.ErrorIs(t, err, ErrCorrupt)
		require.Equal(t, 1, strings.Count(strings.ReplaceAll(err.Error(), path, "PATH"), "journal: "), "%q", err)
	})
}
