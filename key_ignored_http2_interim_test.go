package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// The key-ignoring charge endpoint over HTTP/2 (h2KeyIgnoringCharges)
// sends 103 Early Hints before its answer, one for each new hint ("A
// server MAY emit multiple 103 (Early Hints) responses with additional
// header fields as new information becomes available while the request
// is being processed", RFC 8297 2), then answers k1's charge 201 marked
// ignored. net/http bounds the 1xx responses of a request only while no
// Got1xxResponse hook is set, and idem sets one: it bounds them itself
// (maxInterim, 8). Eight are read past and the 201 settles the payment,
// one stream; a ninth fails the copy, whose answer is then lost, and the
// status endpoint settles the one charge. Without the bound the 201
// after nine was read (streams: the charge alone).
func TestKeyIgnoredEndpointHTTP2InterimResponsesBounded(t *testing.T) {
	answer := func(interims int) h2Answer {
		a, _ := chargedIgnored(0)
		a.interim, a.interims = "103", interims
		return a
	}
	t.Run("eight read past", func(t *testing.T) {
		const body = `{"amount":100,"order_id":"o-1"}`
		s, url, c := startH2KeyIgnoringCharges(t, answer(8), chargedIgnored)
		res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: url + "/api/v1/charge", ResultURL: url + "/api/v1/orders/o-1", Body: []byte(body)})
		requireOutcome(t, res, err, idem.StateSucceeded, nil, "pay_1", "")
		require.Equal(t, 1, s.charged())
		require.Equal(t, []string{body}, s.streams(), "streams: the charge alone")
		rec, err := c.Record(t.Context(), idem.DefaultScope, "k1")
		require.NoError(t, err)
		require.Len(t, rec.Attempts, 1, "journal: the charge")
		require.Equal(t, journal.AttemptSubmit, rec.Attempts[0].Kind)
	})
	t.Run("the ninth fails the copy", func(t *testing.T) {
		requireOneChargeQueried(t, answer(9))
	})
}
