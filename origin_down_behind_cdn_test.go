package idem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Orders a service takes while its provider's servers are down behind
// Cloudflare: every submit is answered by Cloudflare's edge with its own
// 521 "Web server is down" page, the origin having refused the edge's
// connection, so the request was never passed on and nothing executed
// (support.cloudflare.com/hc/en-us/articles/115003011431). Read as a
// gateway's 5xx that may follow the work, the first such answer started
// the key window: an outage longer than it left every order taken during
// it "key expired" for a person, never sent, as if a forgotten key might
// be resent, though no server ever saw it. A connection refused to the
// server itself is sent once it is back; so must this be. Default
// settings but the clock; with and without a result endpoint.
func TestOrdersTakenWhileTheOriginIsDownBehindACDNAreSentOnceItIsBack(t *testing.T) {
	for _, endpoint := range []bool{false, true} {
		t.Run(fmt.Sprintf("result endpoint=%t", endpoint), func(t *testing.T) {
			const n = 3
			e, network := behindOutage(t, func(srv *idemtest.Server) []idem.Option {
				if endpoint {
					return []idem.Option{idem.WithResultEndpoint(srv.URL + "/operations/{key}")}
				}
				return nil
			})
			srv, store, c := e.srv, e.store, e.client

			network.mode.Store(netOriginDown)
			for i := range n {
				_, err := c.Submit(t.Context(), idem.Request{Key: fmt.Sprint("k", i), URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			}
			runUntil(t, e, epoch.Add(2*time.Hour))
			require.Zero(t, srv.Stats().Requests, "nothing reached the server while it was down")

			network.mode.Store(netUp)
			runUntil(t, e, epoch.Add(3*time.Hour))
			for i := range n {
				k := fmt.Sprint("k", i)
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, idem.StateSucceeded, rec.State, "%s an hour after the server came back (review %q)", k, rec.Review)
				require.Emptyf(t, rec.Review, "review of %s", k)
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
				for j, r := range e.submits(k) {
					require.Equalf(t, k, r.Key, "submit %d of %s", j+1, k)
				}
			}
		})
	}
}
