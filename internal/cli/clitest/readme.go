// Package clitest holds what the tests of both idem commands (the bbolt
// one in cmd/idem and the PostgreSQL one in pgjournal/cmd/idem) share, so
// that the README's commands are read and split the same way for both.
package clitest

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// ReadmeCommands returns the arguments of every line of the README at path
// that starts with prefix (the shell words up to the command's own
// arguments), split as a shell would and with any trailing # comment
// dropped.
func ReadmeCommands(t testing.TB, path, prefix string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open README: %v", err)
	}
	defer f.Close()
	var cmds [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		cmds = append(cmds, SplitQuoted(t, strings.TrimPrefix(line, prefix)))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return cmds
}

// SplitQuoted splits a shell line on spaces, keeping "double quoted" words.
func SplitQuoted(t testing.TB, line string) []string {
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
	if quoted {
		t.Fatalf("unbalanced quotes in %q", line)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
