package main

import (
	"testing"

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
	require.Contains(t, stderr, "warning: -settled-before 30m0s is shorter than common payment providers' key windows (24h0m0s, e.g. Stripe)")
	require.Contains(t, stdout, "deleted 3 settled operations")
	_, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)
}
