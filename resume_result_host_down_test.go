package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// A result endpoint on a host of its own (a read service: MTN MoMo-like
// APIs serve the status beside the create, many an exchange a separate
// read API) still down after an outage that took the orders' host down
// too, the orders' host back. A restart's Resume finds the orders of
// the outage's first minutes past their key window, and the later ones
// inside it, after them in the journal (time-ordered keys: ULIDs,
// UUIDv7). Each past-window visit queries the down read service, waits
// out an attempt timeout and is flagged, having made no exchange with
// the orders' host: that says nothing of the orders' host, which is up.
// Counted as a visit that got nowhere there, many in a row made Resume
// give up on the orders' host and leave the orders inside their window
// to Run, which resends nothing while their result endpoint does not
// answer (it reschedules): they waited for the read service, and an
// outage longer than what was left of their key window flagged them for
// a person, though a resend, which Resume makes after a query that got
// no answer, would have been replayed at once. Default settings but the
// clock and a shorter attempt timeout, which only makes each silent
// exchange end sooner in real time.
func TestResumeSettlesAnUpHostsOrdersWhileItsResultHostIsDown(t *testing.T) {
	const old, recent = 40, 8
	start := epoch
	o := newOutageJournal(t, start)
	srv, store := o.srv, o.store

	reads := httptest.NewServer(http.NotFoundHandler()) // never reached: its packets are dropped
	t.Cleanup(reads.Close)
	resultURL := func(key string) string { return reads.URL + "/operations/" + key }
	oldKeys, newKeys := o.submitOldAndRecent(t, start, resultURL, old, recent)

	down := &droppingHost{base: http.DefaultTransport, host: strings.TrimPrefix(reads.URL, "http://"), clock: o.clock}
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: down}), idem.WithClock(o.clock),
		idem.WithAttemptTimeout(200*time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	t.Logf("summary %+v", sum)
	require.Equal(t, old+recent, sum.Visited, "open operations found")
	require.Equal(t, 0, sum.Deferred, "operations left to Run (%+v)", sum)
	for _, key := range newKeys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equal(t, "", rec.Review, "%s: inside its key window", key)
		require.Equal(t, journal.StateSucceeded, rec.State, "%s: its resend replayed", key)
		require.Equal(t, 1, srv.Effects("", key), "orders of %s", key)
	}
	for _, key := range oldKeys {
		require.Equal(t, 1, srv.Effects("", key), "orders of %s", key)
	}
}
