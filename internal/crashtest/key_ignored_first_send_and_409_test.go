package crashtest_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/journal"
)

// openKeyIgnored starts an in-process key-ignored server with faults
// scripted, and a client journaling at path with the default settings
// and the result endpoint; both are closed when the test ends.
func openKeyIgnored(t *testing.T, path string, faults ...idemtest.Fault) (*idemtest.Server, *idem.Client) {
	t.Helper()
	clk := idemtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	srv, err := idemtest.NewServer(idemtest.WithClock(clk.Now), idemtest.WithBehavior(idemtest.KeyIgnored()))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	for _, f := range faults {
		require.NoError(t, srv.Inject(f))
	}
	c, err := idem.Open(path, idem.WithHTTPClient(srv.Client()), idem.WithClock(clk),
		idem.WithResultEndpoint(srv.ResultTemplate()),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", crashtest.Credential)
			return nil
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return srv, c
}

// TestKeyIgnoredEndpointBeforeItsFirstAnswer: an endpoint that ignores the
// key (Solidgate: "A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) says so only
// in its answers. The first payment's answer is lost, and the query
// settles it; the second payment goes out on the query's connection and
// its answer is lost too (the server commits, then drops the
// connection). net/http resends a request with an Idempotency-Key header
// by itself when its reused connection dies after it was written: a
// second order, whose answer was lost as well, and the query found the
// key's last order and idem settled it succeeded, unflagged: two orders,
// nobody told. No answer of the endpoint had reached the process yet, so
// nothing said it de-duplicates: the send goes out once (heard.go), the
// lost answer is idem's to judge, and the query settles the only order.
func TestKeyIgnoredEndpointBeforeItsFirstAnswer(t *testing.T) {
	first, second := crashtest.Key(0), crashtest.Key(1)
	path := filepath.Join(t.TempDir(), "idem.journal")
	srv, c := openKeyIgnored(t, path,
		idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: first},
		idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: second, Count: 2})
	for i, key := range []string{first, second} {
		res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(i)})
		require.NoError(t, err, "Submit(%s)", key)
		require.Equal(t, idem.StateSucceeded, res.State, "Submit(%s): found by the query", key)
	}
	require.NoError(t, c.Close())

	store, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	defer store.Close()
	for _, key := range []string{first, second} {
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, rec.State, "%s: found by the query", key)
		require.Empty(t, rec.Review, "%s: one order", key)
		require.Equal(t, 1, srv.Effects(crashtest.Credential, key), "%s: orders", key)
		require.False(t, journal.SentTwice(rec), "%s: sent once; attempts %s", key, crashtest.DescribeAttempts(rec.Attempts))
		require.Len(t, rec.Attempts, 2, "%s: the submit and the query; attempts %s", key, crashtest.DescribeAttempts(rec.Attempts))
	}
}

// TestKeyIgnoredEndpointsOwn409IsNoKeyConflict: an endpoint that ignores
// the key (Solidgate: "A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) refuses a
// payment with its own 409, marked Idempotency-Status: ignored: a
// conflict with the current state of the order it acts on (the
// reject-409 fault; RFC 9110 15.5.10: "the request could not be
// completed due to a conflict with the target resource's current
// state"), nothing executed. No other request holds the key, as the
// endpoint does not read it. idem read it as one in flight: it resent,
// the resend placed an order (its 201's body garbled, the query found it
// succeeded), and it left the operation unknown, ReviewKeyIgnored, and
// Submit returned ErrKeyConflict: a wrong error, and an order the 409
// had refused. The crash harness met it
// (TestCrashHarness/key-ignored/random_kills, op-0089 at the default
// seed). Read as the endpoint's refusal, it fails the payment with the
// server's reason, and nothing is resent (the garbage-body fault stays
// unused).
func TestKeyIgnoredEndpointsOwn409IsNoKeyConflict(t *testing.T) {
	key := crashtest.Key(0)
	path := filepath.Join(t.TempDir(), "idem.journal")
	srv, c := openKeyIgnored(t, path,
		idemtest.Fault{Kind: idemtest.Reject409, Key: key},
		idemtest.Fault{Kind: idemtest.GarbageBody, Key: key})

	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(0)})
	require.NotNil(t, res, "Submit: %v", err)
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "no other request holds a key the endpoint does not read")
	require.Equal(t, idem.StateFailed, res.State, "the endpoint refused it")
	require.Empty(t, res.Review)
	require.Contains(t, res.Reason, "409")
	require.Equal(t, 0, srv.Effects(crashtest.Credential, key), "orders: the 409 placed none, and nothing was resent")
	require.NoError(t, c.Close())

	store, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	defer store.Close()
	rec, err := store.Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Equal(t, journal.StateFailed, rec.State)
	require.Len(t, rec.Attempts, 1, "sent once; attempts %s", crashtest.DescribeAttempts(rec.Attempts))
}
