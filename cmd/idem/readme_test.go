package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
)

// The README's operator commands run as written, against a journal like
// the one they name: a flag renamed or a command dropped fails here.
func TestReadmeOperatorCommands(t *testing.T) {
	cmds := clitest.ReadmeCommands(t, "../../README.md", "go run ./cmd/idem ")
	require.GreaterOrEqual(t, len(cmds), 8, "operator commands found in the README")

	for _, args := range cmds {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			fx := newJournal(t)
			for i, a := range args {
				switch a {
				case "payments.journal":
					args[i] = fx.path
				case "KEY":
					args[i] = "k-unknown"
				}
			}
			_, stderr, code := runIdem(t, args...)
			require.Equal(t, 0, code, "idem %q: %s", args, stderr)
		})
	}
}
