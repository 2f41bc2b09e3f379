package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every failure names the command once: "idem: operation not found", not
// "idem: idem: operation not found". The running service's Client words
// its errors "idem: ...", and the admin handler sends them as they are;
// the command, which prints "idem: " before any error, printed both.
func TestErrorsNameTheCommandOnce(t *testing.T) {
	file := newJournal(t)
	served := newJournal(t)
	url := serveJournal(t, served.path)
	failures := [][]string{
		{"show", "k-nope"},
		{"show", "-scope", "acct-9", "k-unknown"},
		{"resolve", "k-nope", "-failed", "-reason", "refunded"},
		{"resolve", "k-succeeded", "-failed", "-reason", "refunded"},
		{"key-ignoring", "remove", "POST https://api.example.com/v1/nope"},
		{"key-ignoring", "remove", "not-an-endpoint"},
	}
	for _, mode := range [][]string{{"-url", url}, {"-journal", file.path}} {
		for _, args := range failures {
			_, stderr, code := runIdem(t, append(append([]string{}, mode...), args...)...)
			require.Equal(t, 1, code, "%s %q: %s", mode[0], args, stderr)
			require.True(t, strings.HasPrefix(stderr, "idem: "), "%s %q: %q", mode[0], args, stderr)
			require.NotContains(t, stderr, "idem: idem:", "%s %q", mode[0], args)
		}
	}
}
