package main

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's operator commands run as written, against a journal like
// the one they name: a flag renamed or a command dropped fails here.
func TestReadmeOperatorCommands(t *testing.T) {
	f, err := os.Open("../../README.md")
	require.NoError(t, err)
	defer f.Close()
	var cmds [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		const prefix = "go run ./cmd/idem "
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		cmds = append(cmds, splitQuoted(t, strings.TrimPrefix(line, prefix)))
	}
	require.NoError(t, sc.Err())
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
