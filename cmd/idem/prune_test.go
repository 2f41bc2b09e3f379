package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

func TestPrune(t *testing.T) {
	f := newJournal(t)
	before := fileSum(t, f.path)
	stdout, stderr, code := runIdem(t, "prune", "-journal", f.path, "-settled-before", "720h", "-dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "would delete 2 settled operations")
	require.Equal(t, before, fileSum(t, f.path), "a dry run changed the journal")

	stdout, stderr, code = runIdem(t, "prune", "-journal", f.path, "--settled-before", "30d")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	require.Contains(t, stdout, "deleted 2 settled operations")

	for _, k := range []struct{ scope, key string }{{"default", "k-succeeded"}, {"default", "k-binary"}} {
		_, err := record(t, f.path, k.scope, k.key)
		require.ErrorIs(t, err, journal.ErrNotFound, "%s after prune", k.key)
	}
	// Open operations survive, however old, and so do recent settlements.
	for _, k := range []struct{ scope, key string }{
		{"default", "k-unknown"}, {"default", "k-pending"}, {"default", "k-failed"}, {"acct-2", "k-other"},
	} {
		_, err := record(t, f.path, k.scope, k.key)
		require.NoError(t, err, "%s after prune", k.key)
	}

	stdout, _, code = runIdem(t, "prune", "-journal", f.path, "-settled-before", "720h")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "deleted 0 settled operations")
}

func TestPruneShortWindowWarns(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "prune", "-journal", f.path, "-settled-before", "30m")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "warning: -settled-before 30m0s is shorter than the default key retention (24h0m0s)")
	require.Contains(t, stdout, "deleted 3 settled operations")
	_, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)
}

func TestStats(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "stats", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "journal "+f.path+" (")
	for _, re := range []string{
		`(?m)^  pending\s+1$`, `(?m)^  processing\s+1$`, `(?m)^  unknown\s+1$`,
		`(?m)^  succeeded\s+2$`, `(?m)^  failed\s+1$`, `(?m)^  open\s+3$`,
		`(?m)^  flagged for review\s+1$`, `(?m)^  total\s+6$`,
	} {
		require.Regexp(t, re, stdout)
	}

	stdout, stderr, code = runIdem(t, "stats", "-journal", f.path, "-json")
	require.Equal(t, 0, code, stderr)
	var got struct {
		ByState  map[string]int `json:"by_state"`
		Open     int            `json:"open"`
		Review   int            `json:"review"`
		Total    int            `json:"total"`
		FileSize int64          `json:"file_size"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, map[string]int{"pending": 1, "processing": 1, "unknown": 1, "succeeded": 2, "failed": 1}, got.ByState)
	require.Equal(t, 3, got.Open)
	require.Equal(t, 1, got.Review)
	require.Equal(t, 6, got.Total)
	fi, err := os.Stat(f.path)
	require.NoError(t, err)
	require.Equal(t, fi.Size(), got.FileSize)
}

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
		"hint: use the idem command from the idem version the application is built with (go run github.com/idemkit/idem/cmd/idem@VERSION)", err.Error())
}
