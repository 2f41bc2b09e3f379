package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The journal holds no operation under an empty scope (it refuses one),
// and show and resolve on a journal file refuse -scope "" as a mistake.
// With -url they sent it on, and the admin handler, which reads an empty
// scope as the service's default, answered for another operation: show
// printed k-unknown of scope default (exit 0), and resolve settled it. An
// empty -scope is what an unset variable gives (-scope "$SCOPE"): both
// modes now refuse it alike (exit 2), and the served operation stays
// unknown.
func TestEmptyScopeRefusedAlikeWithFileAndURL(t *testing.T) {
	file := newJournal(t)
	served := newJournal(t)
	url := serveJournal(t, served.path)
	for _, mode := range [][]string{{"-journal", file.path}, {"-url", url}} {
		for _, args := range [][]string{
			{"show", "-scope", "", "k-unknown"},
			{"show", "-json", "-scope", "", "k-unknown"},
			{"resolve", "-scope", "", "k-unknown", "-succeeded", "-reason", "seen in the dashboard", "-by", "alice"},
		} {
			args := append(append([]string{}, mode...), args...)
			out, errOut, code := runIdem(t, args...)
			require.Equal(t, 2, code, "%q: %s%s", args, out, errOut)
			require.Empty(t, out, "%q", args)
			require.Contains(t, errOut, "idem "+args[2]+": empty -scope", "%q", args)
		}
	}
	for _, mode := range [][]string{{"-journal", file.path}, {"-url", url}} {
		out, errOut, code := runIdem(t, append(mode, "show", "k-unknown")...)
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^state: +unknown$`, out, "%q: a refused resolve changed the operation", mode)
	}
}
