package main

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's -dsn commands run as written, against a live journal like
// the one they name: a flag renamed or a command dropped fails here.
func TestReadmeDSNCommands(t *testing.T) {
	f, err := os.Open("../../../README.md")
	require.NoError(t, err)
	defer f.Close()
	var cmds []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		const prefix = "cd pgjournal && go run ./cmd/idem "
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		cmds = append(cmds, strings.TrimPrefix(line, prefix))
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, len(cmds), 4, "-dsn commands found in the README")

	for _, line := range cmds {
		t.Run(line, func(t *testing.T) {
			pg, _ := seeded(t)
			args := splitQuoted(t, line)
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
			if !strings.Contains(line, "-schema") {
				args = append([]string{"-schema", pg.schema}, args...)
			}
			_, stderr, code := runIdem(t, args...)
			require.Equal(t, 0, code, "idem %q: %s", args, stderr)
		})
	}
}

// splitQuoted splits a shell line on spaces, keeping "double quoted" words.
func splitQuoted(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range strings.TrimSpace(line) {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	require.False(t, quoted, "unbalanced quotes in %q", line)
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
