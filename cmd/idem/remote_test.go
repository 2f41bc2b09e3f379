package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
	"github.com/idemkit/idem/journal"
)

// serveJournal serves the journal at path as the running service would
// (clitest.Serve); the handler's URL is what -url takes.
func serveJournal(t testing.TB, path string) string { return clitest.Serve(t, path) }

// withoutBodies drops what only file mode prints: the journaled headers
// and bodies, which the admin handler never serves.
func withoutBodies(out string) string {
	var keep []string
	skipping := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "header:" || strings.HasPrefix(l, "body:"):
			skipping = true
			continue
		case skipping && strings.HasPrefix(l, " "):
			continue
		}
		skipping = false
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// The same commands give the same output on a stopped journal file and on
// the running service's admin handler.
func TestRemoteModeMatchesFileMode(t *testing.T) {
	fx := newJournal(t)
	tests := [][]string{
		{"list"},
		{"list", "-state", "unknown,processing"},
		{"list", "-open"},
		{"list", "-review"},
		{"list", "-older-than", "1d"},
		{"list", "-scope", "acct-2"},
		{"list", "-limit", "2"},
		{"list", "-json"},
		{"show", "k-unknown"},
		{"show", "-scope", "acct-2", "k-other"},
		{"show", "k-failed"},
		{"stats"},
	}
	file := make([]string, len(tests))
	for i, args := range tests {
		out, errOut, code := runIdem(t, append([]string{"-journal", fx.path}, args...)...)
		require.Equal(t, 0, code, "file mode %v: %s", args, errOut)
		file[i] = out
	}
	url := serveJournal(t, fx.path)
	for i, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, code := runIdem(t, append([]string{"-url", url}, args...)...)
			require.Equal(t, 0, code, "remote mode: %s", errOut)
			require.NotContains(t, out, secretToken)
			want := file[i]
			switch args[0] {
			case "show":
				require.Contains(t, out, "body: not served by the admin handler")
				want, out = withoutBodies(want), withoutBodies(out)
			case "stats":
				// The first line names the journal file, or the service.
				require.True(t, strings.HasPrefix(out, "service "+url+"\n"), "got %q", out)
				want, out = want[strings.Index(want, "\n"):], out[strings.Index(out, "\n"):]
			case "list":
				if args[len(args)-1] == "-json" {
					return // the JSON of full records holds bodies: compared below, without them
				}
			}
			require.Equal(t, want, out)
		})
	}
}

func TestRemoteResolve(t *testing.T) {
	fx := newJournal(t)
	url := serveJournal(t, fx.path)

	out, errOut, code := runIdem(t, "-url", url, "resolve", "k-unknown", "-succeeded", "-reason", "seen in the dashboard", "-by", "alice", "-resource-id", "ord_9")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "resolved operation k-unknown in scope default: unknown -> succeeded\n")
	require.Contains(t, out, "  by:          alice\n")
	require.Contains(t, out, "  resource id: ord_9\n")
	require.Contains(t, out, "  attempts:    2\n")

	_, errOut, code = runIdem(t, "-url", url, "resolve", "k-unknown", "-failed", "-reason", "refunded", "-by", "bob")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "already succeeded")
	require.Contains(t, errOut, "409")

	_, errOut, code = runIdem(t, "-url", url, "resolve", "k-nope", "-failed", "-reason", "x", "-by", "bob")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "404")

	_, errOut, code = runIdem(t, "-url", "ftp://x/", "stats")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "-url")

	// Recorded as the file mode records it: who, why, when, from.
	out, _, code = runIdem(t, "-url", url, "show", "k-unknown")
	require.Equal(t, 0, code)
	require.Contains(t, out, "resolved by hand: by alice at ")
	require.Contains(t, out, ", from unknown: seen in the dashboard\n")
}

// The remote list's JSON is the file mode's, without bodies and headers.
func TestRemoteListJSON(t *testing.T) {
	fx := newJournal(t)
	s, err := journal.Open(fx.path, journal.ReadOnly())
	require.NoError(t, err)
	recs, err := s.List(t.Context(), journal.Filter{Scope: "acct-2"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Len(t, recs, 1)
	r := recs[0]
	r.Body, r.BodySHA, r.Header = nil, [32]byte{}, nil
	var want strings.Builder
	require.NoError(t, writeJSON(&want, []recordJSON{toJSON(r)}))

	url := serveJournal(t, fx.path)
	out, errOut, code := runIdem(t, "-url", url, "list", "-scope", "acct-2", "-json")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want.String(), out)
}
