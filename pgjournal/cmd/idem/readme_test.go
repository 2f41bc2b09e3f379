package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
)

// The README's -dsn commands run as written, against a live journal like
// the one they name: a flag renamed or a command dropped fails here.
func TestReadmeDSNCommands(t *testing.T) {
	cmds := clitest.ReadmeCommands(t, "../../../README.md", "cd pgjournal && go run ./cmd/idem ")
	require.GreaterOrEqual(t, len(cmds), 4, "-dsn commands found in the README")

	for _, args := range cmds {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			pg, _ := seeded(t)
			if !slices.Contains(args, "-schema") {
				args = append([]string{"-schema", pg.schema}, args...)
			}
			for i, a := range args {
				switch a {
				case "$DSN":
					args[i] = pg.dsn
				case "idem":
					args[i] = pg.schema
				case "KEY":
					args[i] = "k-unknown"
				}
			}
			_, stderr, code := runIdem(t, args...)
			require.Equal(t, 0, code, "idem %q: %s", args, stderr)
		})
	}
}
