package idem_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// keyIgnoringStoreFull returns the path of a journal whose store of
// endpoints ignoring the key is at its bound,
// journal.MaxKeyIgnoringEndpoints, with paths with ids (POST
// /customers/{id}/charges), one per customer.
func keyIgnoringStoreFull(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.journal")
	js, err := journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	for i := range journal.MaxKeyIgnoringEndpoints {
		require.NoError(t, js.AddKeyIgnoring(t.Context(), fmt.Sprintf("POST https://api.example.com/customers/cus_%d/charges", i)))
	}
	require.NoError(t, js.Close())
	return path
}

// settleFlaggedWithTheStoreFull runs settle once on the journal of
// journalFlaggedAndLost (x flagged ReviewKeyIgnored, l's answer lost on
// the same endpoint) whose store of endpoints ignoring the key is full
// of others (keyIgnoringStoreFull). Then it starts the next process on
// the journal and runs its Resume, which must charge l no second time
// and leave x and l flagged; it returns settle's error.
func settleFlaggedWithTheStoreFull(t *testing.T, s *keyIgnoringCharges, orders string, settle func(*idem.Client) error) error {
	t.Helper()
	path := keyIgnoringStoreFull(t)
	js := journalFlaggedAndLost(t, path, s.srv.URL+"/api/v1/charge", orders)
	c, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	settleErr := settle(c)
	require.NoError(t, c.Close())
	require.NoError(t, js.Close())

	c2 := resumeWithoutResendingL(t, s, path)
	for _, key := range []string{"x", "l"} {
		op, err := c2.Lookup(t.Context(), "", key)
		require.NoError(t, err)
		require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: %s flagged for the endpoint", key)
		require.Equal(t, idem.StateUnknown, op.State, "journal: %s left open, for a person", key)
	}
	return settleErr
}

// Solidgate's charge endpoint answers Idempotency-Status: ignored ("A
// value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests); paths with
// ids filled the journal's store of such endpoints. x's webhook comes;
// Confirm journals x's endpoint before it clears x's flag, the one thing
// on disk that says the endpoint ignores the key. The full store wrote
// nothing and said nil, Confirm settled x, and the next process's Resume
// resent l under the same key: a second charge (charged: [l]). The full
// store is now an error (journal.ErrKeyIgnoringFull): Confirm fails with
// it, writes nothing, and the next process learns the endpoint from x's
// flag: l is flagged, not resent (charged: none).
func TestConfirmOfAKeyIgnoredFlagWithTheStoreFullWritesNothing(t *testing.T) {
	refusedWithTheStoreFull(t, confirmXSucceeded)
}

// refusedWithTheStoreFull runs settleFlaggedWithTheStoreFull's settle of
// x, with no status endpoint, at a Solidgate-style endpoint that ignores
// the key, and returns its error, which must be
// journal.ErrKeyIgnoringFull and say how to make room.
func refusedWithTheStoreFull(t *testing.T, settle func(*idem.Client) error) error {
	t.Helper()
	s := newKeyIgnoringCharges(t, ignoredCreated)
	err := settleFlaggedWithTheStoreFull(t, s, "", settle)
	require.ErrorIs(t, err, journal.ErrKeyIgnoringFull)
	require.NotErrorIs(t, err, idem.ErrNotFound)
	require.ErrorContains(t, err, "idem key-ignoring remove", "the error says how to make room")
	return err
}

// As above, x settled by its status endpoint's "settled" when the caller
// retries it with Do: the drive journals x's endpoint before the query
// that would clear the flag; the full store said nil, the query settled
// x, and the next process resent l (charged: [l]). The drive now queries
// nothing and hands x off, still flagged (charged: none, x queried by
// neither process).
func TestResultQueryOfAKeyIgnoredFlagWithTheStoreFullSettlesNothing(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	var xQueries atomic.Int32
	status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/orders/x" {
			orderNotFound(w) // l's order: its status lags, modelled
			return
		}
		xQueries.Add(1)
		orderStatus("pay_x", "settled")(w)
	}))
	t.Cleanup(status.Close)
	err := settleFlaggedWithTheStoreFull(t, s, status.URL+"/api/v1/orders", func(c *idem.Client) error {
		_, err := c.Do(t.Context(), &idem.Operation{Key: "x"})
		return err
	})
	require.ErrorIs(t, err, journal.ErrKeyIgnoringFull)
	require.Zero(t, xQueries.Load(), "x's status queries: its settlement would clear the flag")
}

// The full store is logged once per Client, not once per endpoint learnt
// past it nor per save tried again (Close): paths with ids teach one
// per customer. Before, nothing was logged: the endpoints went
// unjournaled unsaid.
func TestKeyIgnoringStoreFullLoggedOnce(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	logs := &logCapture{}
	c, err := idem.Open(keyIgnoringStoreFull(t), idem.WithHTTPClient(s.srv.Client()), idem.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	for _, customer := range []string{"cus_a", "cus_b", "cus_c"} {
		res, err := c.Submit(t.Context(), idem.Request{Key: customer, URL: s.srv.URL + "/customers/" + customer + "/charges", Body: []byte(`{"amount":100}`)})
		require.NoError(t, err, "Submit(%s)", customer)
		require.Equal(t, idem.StateSucceeded, res.State)
	}
	require.NoError(t, c.Close())
	s.requireCharges(t, []string{"cus_a", "cus_b", "cus_c"})
	levels, _ := logs.find("idem: the journal keeps as many endpoints that ignore the idempotency key as it can; one learnt now is not journaled, and the operations flagged for it stay flagged (no Confirm, Resolve or result query settles them) until room is made: remove the endpoints no longer called (idem key-ignoring remove, Client.ForgetKeyIgnoring)")
	require.Equal(t, []slog.Level{slog.LevelWarn}, levels)
	for _, msg := range []string{
		"idem: could not journal an endpoint that ignores the idempotency key; its flagged operations still tell the next process",
		"idem: could not journal an endpoint that ignores the idempotency key, again; its flagged operations still tell the next process",
	} {
		levels, _ := logs.find(msg)
		require.Empty(t, levels, "logged per endpoint: %s", msg)
	}
}
