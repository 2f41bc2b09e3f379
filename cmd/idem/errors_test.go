package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

func TestLockedJournal(t *testing.T) {
	f := newJournal(t)
	// The application is running: it holds the journal open for writing.
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	want := "idem: journal " + f.path + " is locked by another process (probably the running application); stop it or wait, then retry\n"
	for _, args := range [][]string{
		{"list"}, {"show", "k-unknown"}, {"stats"},
		{"resolve", "k-unknown", "-failed", "-reason", "x"},
		{"prune", "-settled-before", "720h"},
	} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			stdout, stderr, code := runIdem(t, append(args, "-journal", f.path, "-lock-timeout", "100ms")...)
			elapsed := time.Since(start)
			require.Equal(t, 1, code, stderr)
			require.Empty(t, stdout)
			require.Equal(t, want, stderr)
			require.Less(t, elapsed, 5*time.Second, "gave up after %v", elapsed)
		})
	}
	// Nothing was changed behind the application's back.
	r, err := s.Get(context.Background(), "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, r.State)
}

func TestMissingJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "typo.journal")
	for _, args := range [][]string{
		{"list"}, {"show", "k"}, {"stats"},
		{"resolve", "k", "-failed", "-reason", "x"},
		{"prune", "-settled-before", "720h"},
		{"prune", "-settled-before", "720h", "-dry-run"},
	} {
		t.Run(args[0], func(t *testing.T) {
			stdout, stderr, code := runIdem(t, append(args, "-journal", path)...)
			require.Equal(t, 1, code, stderr)
			require.Empty(t, stdout)
			require.Equal(t, "idem: journal "+path+" does not exist; check -journal or IDEM_JOURNAL (idem never creates a journal)\n", stderr)
			_, err := os.Stat(path)
			require.True(t, errors.Is(err, os.ErrNotExist), "the journal was created: %v", err)
		})
	}

	_, stderr, code := runIdem(t, "list", "-journal", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "is a directory")
}

func TestDamagedJournal(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.journal")
	require.NoError(t, os.WriteFile(garbage, []byte("this is not a bbolt file, not at all, and it is long enough to look like one"), 0o600))
	empty := filepath.Join(dir, "empty.journal")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))

	for _, cmd := range []string{"list", "stats"} {
		_, stderr, code := runIdem(t, cmd, "-journal", garbage)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "not an idem journal")
		require.Contains(t, stderr, "\nhint: check that "+garbage+" is the application's journal")
	}
	for _, args := range [][]string{{"list"}, {"resolve", "k", "-failed", "-reason", "x"}} {
		_, stderr, code := runIdem(t, append(args, "-journal", empty)...)
		require.Equal(t, 1, code)
		require.Equal(t, "idem: journal "+empty+" is an empty file, not an idem journal; check the path\n", stderr)
		fi, err := os.Stat(empty)
		require.NoError(t, err)
		require.Zero(t, fi.Size(), "the empty file was written to")
	}
}

func TestExplainNewerVersion(t *testing.T) {
	err := explain("/var/lib/app/payments.journal",
		fmt.Errorf("journal: open /var/lib/app/payments.journal: %w", journal.ErrVersion))
	require.ErrorIs(t, err, journal.ErrVersion)
	require.Equal(t, "journal: open /var/lib/app/payments.journal: journal: written by a newer idem; upgrade idem to read it\n"+
		"hint: use the idem command from the newest idem version that has run on this journal (go run github.com/idemkit/idem/cmd/idem@VERSION): "+
		"the one the application is built with or, after a rollback, the one it was rolled back from", err.Error())
}
