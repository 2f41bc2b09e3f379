package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

func TestResolve(t *testing.T) {
	f := newJournal(t)
	before := time.Now()
	// Flags may follow the key, with one dash or two.
	stdout, stderr, code := runIdem(t, "-journal", f.path, "resolve", "k-unknown", "--succeeded",
		"--resource-id", "ord_9", "--reason", "confirmed in the provider's dashboard", "--by", "alice")
	after := time.Now()
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	require.Contains(t, stdout, "resolved operation k-unknown in scope default: unknown -> succeeded\n")
	require.Regexp(t, `(?m)^  resource id:\s+ord_9$`, stdout)
	require.Regexp(t, `(?m)^  by:\s+alice$`, stdout)

	r, err := record(t, f.path, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, r.State)
	require.Empty(t, r.Review, "review reason after resolution")
	require.NotNil(t, r.Result)
	require.Equal(t, "ord_9", r.Result.ResourceID)
	require.NotNil(t, r.Resolved)
	require.Equal(t, "alice", r.Resolved.By)
	require.Equal(t, "confirmed in the provider's dashboard", r.Resolved.Reason)
	require.Equal(t, journal.StateUnknown, r.Resolved.From)
	require.False(t, r.Resolved.At.Before(before.Truncate(time.Millisecond)), "At = %v; want after %v", r.Resolved.At, before)
	require.False(t, r.Resolved.At.After(after), "At = %v; want before %v", r.Resolved.At, after)
	require.Equal(t, r.Resolved.At, r.Settled)
	require.Len(t, r.Attempts, 2, "attempts kept")

	// The resolution shows up in show.
	stdout, _, code = runIdem(t, "show", "-journal", f.path, "k-unknown")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "resolved by hand: by alice at ")
	require.Contains(t, stdout, "from unknown: confirmed in the provider's dashboard\n")
}

func TestResolveDefaults(t *testing.T) {
	f := newJournal(t)
	t.Setenv("USER", "bob")
	_, stderr, code := runIdem(t, "resolve", "-journal", f.path, "-scope", "acct-2", "-failed", "-reason", "cancelled by the provider", "k-other")
	require.Equal(t, 0, code, stderr)
	r, err := record(t, f.path, "acct-2", "k-other")
	require.NoError(t, err)
	require.Equal(t, journal.StateFailed, r.State)
	require.Equal(t, "bob", r.Resolved.By, "-by defaults to $USER")
	require.Equal(t, journal.StateProcessing, r.Resolved.From)
	require.Equal(t, "pay_5", r.Result.ResourceID, "the recorded resource id is kept without -resource-id")
	require.Equal(t, 202, r.Result.StatusCode, "what the server said is kept")

	t.Setenv("USER", "")
	t.Setenv("USERNAME", "")
	_, stderr, code = runIdem(t, "resolve", "-journal", f.path, "-failed", "-reason", "never sent", "k-pending")
	require.Equal(t, 0, code, stderr)
	r, err = record(t, f.path, "default", "k-pending")
	require.NoError(t, err)
	require.Equal(t, "operator", r.Resolved.By)
}

func TestResolveTerminalNeedsForce(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "resolve", "-journal", f.path, "k-succeeded", "-failed", "-reason", "refunded")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, `idem: operation "k-succeeded" in scope "default" is already succeeded (settled `)
	require.Contains(t, stderr, "pass -force to change a settled operation")
	r, err := record(t, f.path, "default", "k-succeeded")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, r.State)
	require.Nil(t, r.Resolved)

	_, stderr, code = runIdem(t, "resolve", "-journal", f.path, "k-succeeded", "-failed", "-reason", "refunded", "-force")
	require.Equal(t, 0, code, stderr)
	r, err = record(t, f.path, "default", "k-succeeded")
	require.NoError(t, err)
	require.Equal(t, journal.StateFailed, r.State)
	require.Equal(t, journal.StateSucceeded, r.Resolved.From)
	require.Equal(t, "ord_1", r.Result.ResourceID, "the recorded resource id is kept")
}

func TestResolveUsage(t *testing.T) {
	f := newJournal(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"both", []string{"k-unknown", "-succeeded", "-failed", "-reason", "x"}, "give one of -succeeded and -failed, not both"},
		{"neither", []string{"k-unknown", "-reason", "x"}, "say how the operation ended: -succeeded or -failed"},
		{"no reason", []string{"k-unknown", "-succeeded"}, "-reason is required"},
		{"blank reason", []string{"k-unknown", "-succeeded", "-reason", "  "}, "-reason is required"},
		{"no key", []string{"-succeeded", "-reason", "x"}, "no key given"},
		{"two keys", []string{"k-unknown", "k-pending", "-succeeded", "-reason", "x"}, "one key expected, got 2 arguments"},
		{"empty scope", []string{"k-unknown", "-succeeded", "-reason", "x", "-scope", ""}, "empty -scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fileSum(t, f.path)
			stdout, stderr, code := runIdem(t, append([]string{"resolve", "-journal", f.path}, tt.args...)...)
			require.Equal(t, 2, code, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, "idem resolve: "+tt.want)
			require.Contains(t, stderr, "Run 'idem resolve -h' for usage.")
			require.Equal(t, before, fileSum(t, f.path), "journal changed")
		})
	}
}

func TestResolveUnknownKey(t *testing.T) {
	f := newJournal(t)
	_, stderr, code := runIdem(t, "resolve", "-journal", f.path, "-scope", "acct-9", "nope", "-failed", "-reason", "x")
	require.Equal(t, 1, code)
	require.Equal(t, "idem: no operation with key \"nope\" in scope \"acct-9\"; list them with `idem list`\n", stderr)
}
