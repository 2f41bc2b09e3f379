package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// The endpoints below are journaled as ignoring the key, as a Client names
// them after an answer said so: Solidgate's payment endpoints say so per
// endpoint ("Idempotency support varies by endpoint. [...] A value of
// ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests).
const (
	chargeEndpoint = "POST https://api.solidgate.example/api/v1/charge"
	refundEndpoint = "POST https://api.solidgate.example/api/v1/refund"
)

const noEndpoints = "idem: no endpoint is journaled as ignoring the idempotency key\n"

// removedNote is remove's note after it flagged n operations, or after
// -url's (n < 0), whose handler does not tell how many.
func removedNote(n int) string {
	what := `the open operations to it that may have executed are flagged "key ignored"`
	if n >= 0 {
		what = fmt.Sprintf(`flagged %d open operation(s) to it that may have executed "key ignored"`, n)
	}
	return "note: " + what + " (never resent); until settled, each operation so flagged teaches it again " +
		"(at Resume, a Run pass that reads them, a process's next start): settle them (idem list -review)\n"
}

// unknownEndpoint is remove's error for an endpoint not journaled.
func unknownEndpoint(e string) string {
	return `no endpoint "` + e + `" is known to ignore the idempotency key; list them with ` + "`idem key-ignoring`" + ` and pass one as listed ("METHOD URL")`
}

// keepEndpoints journals es in the journal at path, as a Client would.
func keepEndpoints(t *testing.T, path string, es ...string) {
	t.Helper()
	s, err := journal.Open(path)
	require.NoError(t, err)
	for _, e := range es {
		require.NoError(t, s.AddKeyIgnoring(context.Background(), e))
	}
	require.NoError(t, s.Close())
}

// list runs key-ignoring's list, read-only: the file is left as it was.
func listEndpoints(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	path := args[1] // -journal PATH
	before := fileSum(t, path)
	stdout, stderr, code := runIdem(t, args...)
	require.Equal(t, 0, code, "idem %q: %s", args, stderr)
	require.Equal(t, before, fileSum(t, path), "idem %q changed the journal", args)
	return stdout, stderr
}

func TestKeyIgnoringListFile(t *testing.T) {
	v2 := filepath.Join(t.TempDir(), "v2.journal")
	data, err := os.ReadFile(filepath.Join("..", "..", "journal", "testdata", "v2", "journal.db"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(v2, data, 0o600))
	for name, path := range map[string]string{
		"none journaled":           newJournal(t).path,
		"an older file (format 2)": v2,
	} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr := listEndpoints(t, "-journal", path, "key-ignoring", "list")
			require.Empty(t, stdout)
			require.Equal(t, noEndpoints, stderr)
			stdout, stderr = listEndpoints(t, "-journal", path, "key-ignoring", "-json")
			require.Equal(t, "{\n  \"endpoints\": []\n}\n", stdout)
			require.Empty(t, stderr)
		})
	}

	t.Run("one", func(t *testing.T) {
		fx := newJournal(t)
		keepEndpoints(t, fx.path, chargeEndpoint)
		stdout, stderr := listEndpoints(t, "-journal", fx.path, "key-ignoring")
		require.Equal(t, "ENDPOINT\n"+chargeEndpoint+"\n", stdout)
		require.Empty(t, stderr)
		stdout, _ = listEndpoints(t, "-journal", fx.path, "key-ignoring", "list", "-json")
		require.Equal(t, "{\n  \"endpoints\": [\n    \""+chargeEndpoint+"\"\n  ]\n}\n", stdout)
	})
}

func TestKeyIgnoringRemoveFile(t *testing.T) {
	fx := newJournal(t)
	keepEndpoints(t, fx.path, chargeEndpoint, refundEndpoint)

	stdout, stderr, code := runIdem(t, "-journal", fx.path, "key-ignoring", "remove", chargeEndpoint)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "removed "+chargeEndpoint+": an operation to it whose answer is lost is resent under the same key again\n"+removedNote(0), stdout)
	require.Empty(t, stderr)
	stdout, _ = listEndpoints(t, "-journal", fx.path, "key-ignoring")
	require.Equal(t, "ENDPOINT\n"+refundEndpoint+"\n", stdout)

	// As two arguments, the method and the URL, and with -json.
	stdout, stderr, code = runIdem(t, "-journal", fx.path, "key-ignoring", "remove", "-json", "POST", "https://api.solidgate.example/api/v1/refund")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "{\n  \"removed\": \""+refundEndpoint+"\"\n}\n", stdout)
	stdout, stderr = listEndpoints(t, "-journal", fx.path, "key-ignoring")
	require.Empty(t, stdout)
	require.Equal(t, noEndpoints, stderr)

	stdout, stderr, code = runIdem(t, "-journal", fx.path, "key-ignoring", "remove", chargeEndpoint)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "idem: "+unknownEndpoint(chargeEndpoint)+"\n", stderr)
}

func TestKeyIgnoringUsageErrors(t *testing.T) {
	fx := newJournal(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"remove"}, `no endpoint given: pass one as list prints it, such as "POST https://api.example.com/v1/pay"`},
		{[]string{"remove", "POST", "https://a.example/x", "extra", "more"}, "one endpoint expected (METHOD URL), got 4 arguments"},
		{[]string{"list", "extra"}, `unexpected argument "extra": list takes none`},
		{[]string{"forget", chargeEndpoint}, `unknown subcommand "forget": want list or remove`},
	} {
		args := append([]string{"-journal", fx.path, "key-ignoring"}, tc.args...)
		stdout, stderr, code := runIdem(t, args...)
		require.Equal(t, 2, code, "idem %q", args)
		require.Empty(t, stdout)
		require.Equal(t, "idem key-ignoring: "+tc.msg+"\nRun 'idem key-ignoring -h' for usage.\n", stderr, "idem %q", args)
	}
}

// -url: the running service lists what its Client takes to ignore the key
// and forgets one, in its journal and in its memory, with the file mode's
// output; an unknown one is the handler's 404, which says so.
func TestKeyIgnoringRemote(t *testing.T) {
	fx := newJournal(t)
	keepEndpoints(t, fx.path, chargeEndpoint)
	fileOut, _ := listEndpoints(t, "-journal", fx.path, "key-ignoring")
	base := serveJournal(t, fx.path)

	stdout, stderr, code := runIdem(t, "-url", base, "key-ignoring")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fileOut, stdout, "the file mode's output")
	require.Equal(t, "ENDPOINT\n"+chargeEndpoint+"\n", stdout)

	stdout, stderr, code = runIdem(t, "-url", base, "key-ignoring", "remove", chargeEndpoint)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "removed "+chargeEndpoint+": an operation to it whose answer is lost is resent under the same key again\n"+removedNote(-1), stdout)

	stdout, stderr, code = runIdem(t, "-url", base, "key-ignoring", "-json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "{\n  \"endpoints\": []\n}\n", stdout)

	stdout, stderr, code = runIdem(t, "-url", base, "key-ignoring", "remove", chargeEndpoint)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "idem: "+unknownEndpoint(chargeEndpoint)+" (admin handler "+base+", 404)\n", stderr)
}

// k-pending's one send to the orders endpoint may have executed (written,
// no answer) while the endpoint ignored the key, which kept no key for
// it. Removed from the journal, the endpoint was no longer known to the
// service's next start, which resent k-pending under the same key: a
// second order. remove flags it "key ignored" first, as a drive that
// visited it before the removal would have; k-unknown, flagged already,
// keeps its flag, and the settled ones are left as they were. acct-2's
// k-other, open to the same endpoint, has had its answer (202, pay_5 held
// as processing): no send of it was lost, none of it a resend could
// repeat, and it is left unflagged.
func TestKeyIgnoringRemoveFileFlagsWhatMayHaveExecuted(t *testing.T) {
	fx := newJournal(t)
	const ordersEndpoint = "POST https://api.example.com/v1/orders"
	keepEndpoints(t, fx.path, ordersEndpoint)

	stdout, stderr, code := runIdem(t, "-journal", fx.path, "key-ignoring", "remove", ordersEndpoint)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "removed "+ordersEndpoint+": an operation to it whose answer is lost is resent under the same key again\n"+removedNote(1), stdout)

	for ref, review := range map[[2]string]string{
		{"default", "k-pending"}:   journal.ReviewKeyIgnored,
		{"default", "k-unknown"}:   "key expired",
		{"default", "k-succeeded"}: "",
		{"acct-2", "k-other"}:      "",
	} {
		rec, err := record(t, fx.path, ref[0], ref[1])
		require.NoError(t, err)
		require.Equal(t, review, rec.Review, "journal: %s/%s's Review", ref[0], ref[1])
	}
	stdout, _ = listEndpoints(t, "-journal", fx.path, "key-ignoring")
	require.Empty(t, stdout, "endpoints after remove")
}

// The journal keeps no endpoint (its save was lost with the process, or
// the file predates them), but an open operation flagged "key ignored"
// for it (acct-2's k-other, standing in for one whose answer said so)
// makes it known: remove flags k-pending, whose one send there may have
// executed, as a drive would, and, removing nothing, exits 1 saying the
// endpoint is not kept; it said only that, the flag it had just written
// untold.
func TestKeyIgnoringRemoveFileNotKeptButKnown(t *testing.T) {
	fx := newJournal(t)
	const ordersEndpoint = "POST https://api.example.com/v1/orders"
	flagOtherKeyIgnored(t, fx.path)

	stdout, stderr, code := runIdem(t, "-journal", fx.path, "key-ignoring", "remove", ordersEndpoint)
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, `hint: the journal does not keep it, but an open operation flagged "key ignored" for it makes it known: `+
		`1 more open operation(s) to it that may have executed were flagged "key ignored"`)
	rec, err := record(t, fx.path, "default", "k-pending")
	require.NoError(t, err)
	require.Equal(t, journal.ReviewKeyIgnored, rec.Review, "journal: k-pending's Review")
}
