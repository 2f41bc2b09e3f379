package idem_test

import (
	"net/http"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// The journal of journalFlaggedAndLost, on the Solidgate endpoint that
// ignores the key (keyIgnoringCharges), each payment with its order's
// status endpoint. The caller retries x with Do after the restart, before
// any Resume: the drive learns the endpoint from x's flag and journals it
// beside its query, but that save failed (the disk full for a while), and
// the status endpoint's "settled" settled x and cleared the flag, the one
// thing on disk that said the endpoint ignores the key. The next process
// queried l (not found: the status endpoint tells of an order's last
// payment, modelled as lagging) and resent it under the same key: a
// second charge. A drive now journals the endpoint of an operation
// flagged for it before it queries; failing, it queries nothing and
// hands the operation off, still flagged, and the next drive journals
// the endpoint before its query settles x.
func TestResultQueryOfAKeyIgnoredFlagWhoseSaveFailedSettlesNothing(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	s.result = func(n int, w http.ResponseWriter) {
		if n == 1 { // x's order
			orderStatus("pay_x", "settled")(w)
			return
		}
		orderNotFound(w)
	}
	// The caller retries until Do settles it.
	errs, c2 := settleFlaggedWhileSavesFail(t, s, s.srv.URL+"/api/v1/orders", func(c *idem.Client) error {
		_, err := c.Do(t.Context(), &idem.Operation{Key: "x"})
		return err
	})
	require.Len(t, errs, 2, "Do calls: the first queried nothing, the endpoint's saves failed")
	require.ErrorIs(t, errs[0], syscall.ENOSPC)
	x, err := c2.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, x.State, "x settled by the second Do's query")
	require.Equal(t, 2, x.Attempts, "x's attempts: its charge and one query")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 2, s.queries, "status queries: x's, and l's after the restart")
}
