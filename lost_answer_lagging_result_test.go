package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
)

// The order commits, its answer is lost, and the result endpoint is a read
// path a minute behind (Stripe's Search API, "data is not available for
// search for up to a minute"; modelled): it answers 404 for the order. With
// the key in a header the server de-duplicates, so idem's resend after the
// "not found" is the order's stored 201, replayed: settled succeeded at
// once, the one order, whatever the lag.
func TestLostAnswerBehindALaggingResultEndpointIsReplayed(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv := faultedServer(t, clock, idemtest.Fault{Kind: idemtest.LostAnswerLag, Key: "k", Delay: time.Minute})
	c := defaultClientOf(t, srv, clock)

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "ord_000001", res.ResourceID)
	require.True(t, res.Replayed)
	require.Equal(t, []int{0, http.StatusCreated}, submitStatuses(srv), "the order, its answer lost; the resend, replayed")
	require.Equal(t, 1, srv.Stats().Queries, "asked once, not found: the lag")
	requireOneOrder(t, srv, "k")
}

// An order API whose key is the client order id in the body, unique among
// open orders only (Binance's newClientOrderId): the filled order's id is
// free again, so a resend is a second order, and its GET order answers
// -2013 "Order does not exist." for up to about a minute after the fill
// (dev.binance.vision FAQ). With the answer lost (the lost-answer-lag
// fault, no transport of the test's own) idem only asks while the lag may
// last (DefaultResultLag): the call ends unknown with one order, and once
// the read path has caught up Resume finds it, never resending.
func TestLostAnswerBehindALaggingOrderQueryIsNeverResent(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	key := crashtest.Key(1)
	srv, c := openOnlyExchange(t, clock, nil,
		idemtest.Fault{Kind: idemtest.LostAnswerLag, Key: key, Delay: 62 * time.Second})
	requireUnknownAndOnlyAskedWithinTheLag(t, c, srv, clock, key, 1)

	clock.Advance(idem.DefaultResultLag)
	requireFirstOrderFound(t, c, srv, key)
}
