package fakeserver_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestSubmitsAfterFinalLeavesOutTurnedAway: a submit the server turns away
// unprocessed (429, 503, a 500 before the commit) told the client to send
// again, so it is no resend of the key's final answer; the replay that
// follows is. The fault matrix's mixed row once stacked two 503s on a key
// whose 409 was final and counted idem's right resends against it.
func TestSubmitsAfterFinalLeavesOutTurnedAway(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
	for _, tt := range []struct {
		kind   fakeserver.FaultKind
		status int
	}{
		{fakeserver.Throttle, http.StatusTooManyRequests},
		{fakeserver.Unavailable, http.StatusServiceUnavailable},
		{fakeserver.ErrorBeforeCommit, http.StatusInternalServerError},
	} {
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: tt.kind}))
		require.Equal(t, tt.status, h.submit(t, "k1", "{}").status, tt.kind)
	}
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, fakeserver.KeyStats{Effects: 1, SubmitsAfterFinal: 1}, h.srv.KeyStats("", "k1"))
	require.Equal(t, 1, h.srv.Stats().MaxSubmitsAfterFinal)
}
