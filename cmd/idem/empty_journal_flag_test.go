package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// An empty -journal or -url is what an unset variable gives (-journal
// "$JOURNAL", -url "$ADMIN_URL"), and the command took it for the flag
// left out: it fell to $IDEM_JOURNAL, another service's journal on the
// same host, and resolve settled that journal's operation of the same
// scope and key, one the operator never named (an order paid there,
// marked failed: its caller pays again). Given empty, either flag is now
// refused (exit 2) before any journal is opened, and $IDEM_JOURNAL's
// operation stays unknown.
func TestEmptyJournalOrURLFlagRefused(t *testing.T) {
	other := newJournal(t)
	t.Setenv("IDEM_JOURNAL", other.path)
	for _, flag := range []string{"-journal", "-url"} {
		for _, args := range [][]string{
			{flag, "", "resolve", "k-unknown", "-failed", "-reason", "declined at the bank", "-by", "alice"},
			{"resolve", "k-unknown", flag, "", "-failed", "-reason", "declined at the bank", "-by", "alice"},
			{flag, "", "show", "k-unknown"},
			{flag, "", "list"},
		} {
			out, errOut, code := runIdem(t, args...)
			require.Equal(t, 2, code, "%q: %s%s", args, out, errOut)
			require.Empty(t, out, "%q", args)
			require.Contains(t, errOut, "empty "+flag+": ", "%q", args)
		}
	}
	rec, err := record(t, other.path, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, rec.State, "$IDEM_JOURNAL's operation was resolved")
}
