package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
)

// Every failure names the command once, with -dsn, a journal file and
// -url: the running service's Client words its errors "idem: ...", and
// the admin handler sends them as they are; the command, which prints
// "idem: " before any error, printed both ("idem: idem: operation not
// found").
func TestErrorsNameTheCommandOnce(t *testing.T) {
	pg, file := seeded(t)
	_, served := seeded(t)
	modes := [][]string{pg.args(), {"-journal", file}, {"-url", clitest.Serve(t, served)}}
	failures := [][]string{
		{"show", "k-nope"},
		{"resolve", "k-nope", "-failed", "-reason", "refunded"},
		{"resolve", "k-succeeded", "-failed", "-reason", "refunded"},
		{"key-ignoring", "remove", "POST https://api.example.com/v1/nope"},
		{"key-ignoring", "remove", "not-an-endpoint"},
	}
	for _, mode := range modes {
		for _, args := range failures {
			_, stderr, code := runIdem(t, append(append([]string{}, mode...), args...)...)
			require.Equal(t, 1, code, "%s %q: %s", mode[0], args, stderr)
			require.True(t, strings.HasPrefix(stderr, "idem: "), "%s %q: %q", mode[0], args, stderr)
			require.NotContains(t, stderr, "idem: idem:", "%s %q", mode[0], args)
		}
	}
}
