package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

func TestCheckAndCompact(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "check", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "ok")
	before, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)

	stdout, stderr, code = runIdem(t, "compact", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "compacted")
	after, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, before, after, "a record after compact")

	// The application holds the lock: both say so and change nothing.
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	defer s.Close()
	for _, cmd := range []string{"check", "compact"} {
		start := time.Now()
		_, stderr, code = runIdem(t, cmd, "-journal", f.path, "-lock-timeout", "100ms")
		require.Equal(t, 1, code, cmd)
		require.Contains(t, stderr, "locked by another process", cmd)
		require.Less(t, time.Since(start), 10*time.Second, cmd)
	}
}
