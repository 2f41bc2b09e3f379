package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// An empty -dsn (-dsn "$DATABASE_URL", the variable unset) read as -dsn
// left out: resolve fell to $IDEM_JOURNAL's file, another journal than
// the database the operator meant, and settled its operation of the same
// scope and key. It is now refused (exit 2) before anything is opened.
func TestEmptyDSNFlagRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payments.journal")
	f, err := journal.Open(path)
	require.NoError(t, err)
	seed(t, f, records(time.Now()))
	require.NoError(t, f.Close())
	t.Setenv("IDEM_JOURNAL", path)

	for _, args := range [][]string{
		{"-dsn", "", "resolve", "k-unknown", "-failed", "-reason", "declined at the bank", "-by", "alice"},
		{"resolve", "-dsn", "", "k-unknown", "-failed", "-reason", "declined at the bank", "-by", "alice"},
		{"-dsn", "", "list"},
	} {
		out, errOut, code := runIdem(t, args...)
		require.Equal(t, 2, code, "%q: %s%s", args, out, errOut)
		require.Empty(t, out, "%q", args)
		require.Contains(t, errOut, "empty -dsn: ", "%q", args)
	}
	s, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	rec, err := s.Get(context.Background(), "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, rec.State, "$IDEM_JOURNAL's operation was resolved")
}
