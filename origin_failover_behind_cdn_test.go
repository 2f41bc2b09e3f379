package idem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Cloudflare's 521 is no proof that nothing executed when the API's
// origins sit in a Cloudflare load balancer's pool: its zero-downtime
// failover retries a request whose first origin took it and never
// answered (522) on another origin, and that one's 521 is what the client
// gets (netFailedOver). Here the pool is down for two hours after such a
// failover: every later submit gets Cloudflare's 521. The key window runs from the submit the
// failover passed on, and a server keeping keys 30 minutes (the Fiber
// middleware's default: idemtest.ShortWindow) has forgotten the key when
// it is back: a resend then is a second order. The operation is flagged
// "key expired" for a person, never resent once its window has passed.
// Default settings but the clock; with and without a result endpoint.
func TestEdge521AfterFailoverStartsTheKeyWindow(t *testing.T) {
	for _, endpoint := range []bool{false, true} {
		t.Run(fmt.Sprintf("result endpoint=%t", endpoint), func(t *testing.T) {
			e, network := behindOutage(t, func(srv *idemtest.Server) []idem.Option {
				if endpoint {
					return []idem.Option{idem.WithResultEndpoint(srv.URL + "/operations/{key}")}
				}
				return nil
			}, idemtest.WithBehavior(idemtest.ShortWindow()))
			srv, c := e.srv, e.client

			network.then.Store(netOriginDown)
			network.mode.Store(netFailedOver)
			_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, 1, srv.Effects("", "k"), "the order origin A took")
			runUntil(t, e, epoch.Add(2*time.Hour))

			network.mode.Store(netUp)
			runUntil(t, e, epoch.Add(3*time.Hour))
			require.Equal(t, 1, srv.Effects("", "k"), "orders")
			require.Len(t, e.submits("k"), 1, "submits that reached the server")
			rec := e.record("k")
			require.Equal(t, idem.StateUnknown, rec.State)
			require.Equal(t, idem.ReviewKeyExpired, rec.Review)
		})
	}
}
