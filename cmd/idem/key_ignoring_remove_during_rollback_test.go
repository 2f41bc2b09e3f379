package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// After a rollback, k-pending is an open operation the newer idem wrote,
// which this release cannot read: sent to the endpoint with its answer
// lost, it could not be flagged by the removal, and the newer idem,
// running again without the endpoint, would resend it under the same key
// (a second charge, TestRemoveKeyIgnoringRefusedOverOpenRecordFromNewerIdem).
// key-ignoring remove removed the endpoint (exit 0); it is now refused,
// on the journal file and through the running service's handler (409),
// with exit 1, and the endpoint stays kept.
func TestKeyIgnoringRemoveRefusedDuringRollback(t *testing.T) {
	fx := newJournal(t)
	keepEndpoints(t, fx.path, chargeEndpoint)
	makeNewer(t, fx.path, "k-pending")
	const refused = "the journal holds 1 open operation(s) written by a newer idem, which this one cannot read"

	stdout, stderr, code := runIdem(t, "-journal", fx.path, "key-ignoring", "remove", chargeEndpoint)
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, refused)
	require.Contains(t, stderr, "remove the endpoint with the newer idem")
	require.Contains(t, stderr, "hint: use the idem command from the newest idem version")
	stdout, _ = listEndpoints(t, "-journal", fx.path, "key-ignoring")
	require.Equal(t, "ENDPOINT\n"+chargeEndpoint+"\n", stdout, "endpoints after the refusal")

	base := serveJournal(t, fx.path)
	stdout, stderr, code = runIdem(t, "-url", base, "key-ignoring", "remove", chargeEndpoint)
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, refused)
	require.Contains(t, stderr, "remove the endpoint with the newer idem (admin handler "+base+", 409)", "the handler's message, whole")
	stdout, stderr, code = runIdem(t, "-url", base, "key-ignoring")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "ENDPOINT\n"+chargeEndpoint+"\n", stdout, "endpoints after the refusal")
}
