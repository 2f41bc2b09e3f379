package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestResolveRefusesWhatTheClientRefuses: the Client's Resolve bounds
// ResourceID and By to 255 bytes and Reason to 1024, and refuses control
// characters in the first two and invalid UTF-8 in any (every later write
// of the operation rewrites them), but idem resolve wrote a 2,000-byte
// reason, a By with a newline and a resource id with a tab straight into
// the journal. Each is now refused, and the operation is left as it was.
func TestResolveRefusesWhatTheClientRefuses(t *testing.T) {
	f := newJournal(t)
	before := fileSum(t, f.path)
	for name, flags := range map[string][]string{
		"long reason":        {"-reason", strings.Repeat("x", 2000)},
		"long by":            {"-reason", "x", "-by", strings.Repeat("b", 300)},
		"long resource id":   {"-reason", "x", "-resource-id", strings.Repeat("r", 2100)},
		"newline in by":      {"-reason", "x", "-by", "ann\nbob"},
		"tab in resource id": {"-reason", "x", "-resource-id", "ord\t1"},
		"invalid reason":     {"-reason", "paid\xff"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"resolve", "-journal", f.path, "k-unknown", "-failed"}, flags...)
			stdout, stderr, code := runIdem(t, args...)
			require.Equal(t, 2, code, "stdout %q stderr %q", stdout, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, "idem resolve: ")
		})
	}
	require.Equal(t, before, fileSum(t, f.path), "a refused resolve changed the journal")
	r, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, r.State)
}

// TestTableQuotesInvalidUTF8: a reason with a byte that is not UTF-8 (a
// custom Decoder's Outcome.Reason, say) was printed as is; 0xff is
// text/tabwriter's escape character, so the rest of the table lost its
// columns. It is quoted, like a control character.
func TestTableQuotesInvalidUTF8(t *testing.T) {
	f := newJournal(t)
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	_, err = s.Update(context.Background(), "default", "k-pending", func(r *journal.Record) error {
		r.State, r.Settled = journal.StateFailed, time.Now()
		r.Result = &journal.Result{StatusCode: 402, Reason: "declined \xff by issuer"}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	stdout, stderr, code := runIdem(t, "list", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stdout, "\xff")
	require.Contains(t, stdout, `"declined \xff by issuer"`)

	stdout, stderr, code = runIdem(t, "show", "-journal", f.path, "k-pending")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stdout, "\xff")
	require.NotContains(t, stdout, "\t", "show's columns lost their alignment")
}
