package idem_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// h2KeyIgnoringCharges is a charge endpoint that ignores the key
// (Solidgate: "Idempotency support varies by endpoint. Send the request
// with an Idempotency-Key header and check the Idempotency-Status value.
// A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) over HTTP/2,
// behind a front that resets the first payment's stream PROTOCOL_ERROR
// once it was forwarded and charged (pay_1; modelled: RFC 9113 8.7 says
// only REFUSED_STREAM and a GOAWAY below the stream mean "not
// processed"), as first says (h2ProtocolErrorAfterCharge, or with an
// informational response before the reset). Each later payment is
// answered by then, given the charges so far; a GET is the status
// endpoint, naming the order's last payment (modelled), which charges
// nothing.
type h2KeyIgnoringCharges struct {
	*rawH2
	charges int // under rawH2.mu
}

func startH2KeyIgnoringCharges(t *testing.T, first h2Answer, then func(charges int) (h2Answer, bool)) (*h2KeyIgnoringCharges, string, *idem.Client) {
	t.Helper()
	s := &h2KeyIgnoringCharges{rawH2: &rawH2{}}
	s.answer = func(body string) h2Answer {
		if body == "" {
			return h2Answer{status: "200", header: [][2]string{{"content-type", "application/json"}},
				body: fmt.Sprintf(`{"id":"pay_%d","order_id":"o-1","status":"settled"}`, s.charges)}
		}
		if s.charges == 0 {
			s.charges++
			return first
		}
		a, charged := then(s.charges)
		if charged {
			s.charges++
		}
		return a
	}
	url, hc := s.start(t)
	return s, url, journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
}

func (s *h2KeyIgnoringCharges) charged() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.charges
}

// h2ProtocolErrorAfterCharge is the first payment's stream reset
// PROTOCOL_ERROR after it charged.
var h2ProtocolErrorAfterCharge = h2Answer{protocolError: true}

// chargedIgnored charges afresh, answered 201 marked ignored.
func chargedIgnored(charges int) (h2Answer, bool) {
	return h2Answer{status: "201", header: [][2]string{{"content-type", "application/json"}, {"idempotency-status", "ignored"}},
		body: fmt.Sprintf(`{"id":"pay_%d","status":"settled"}`, charges+1)}, true
}

// First contact with such an endpoint: no answer of it has said yet
// whether it reads the key. net/http's HTTP/2 transport sends a request
// again after a peer's PROTOCOL_ERROR reset (golang/go#47635), and idem
// let it on an endpoint not heard from, stopping only HTTP/1 resends:
// the copy charged again (pay_2), its 201 settled the payment with one
// attempt journaled, unflagged: two charges, nobody told. Now the copy
// written whole is not rewound over either protocol, and the lost answer
// is idem's: the status endpoint settles the one charge; without one,
// idem's resend under the same key charges again and is flagged
// ReviewMaybeTwice.
func TestKeyIgnoredEndpointHTTP2ProtocolErrorOnFirstContact(t *testing.T) {
	const body = `{"amount":100,"order_id":"o-1"}`
	t.Run("the status endpoint settles the one charge", func(t *testing.T) {
		requireOneChargeQueried(t, h2ProtocolErrorAfterCharge)
	})
	t.Run("no status endpoint: the second charge flagged", func(t *testing.T) {
		s, url, c := startH2KeyIgnoringCharges(t, h2ProtocolErrorAfterCharge, chargedIgnored)
		res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: url + "/api/v1/charge", Body: []byte(body)})
		requireOutcome(t, res, err, idem.StateSucceeded, nil, "pay_2", idem.ReviewMaybeTwice)
		require.Equal(t, 2, s.charged())
		require.Equal(t, []string{body, body}, s.streams(), "streams: the charge, then idem's resend")
		require.Equal(t, []bool{true, true}, s.carried("k1"), "the same key on both")

		requireChargeThenResend(t, c, journal.StateSucceeded, idem.ReviewMaybeTwice)
	})
}

// requireOneChargeQueried fails unless k1's payment, its stream given
// first, is one charge (pay_1) that the status endpoint settles: the
// charge went out once with k1, then the query; both journaled.
func requireOneChargeQueried(t *testing.T, first h2Answer) {
	t.Helper()
	const body = `{"amount":100,"order_id":"o-1"}`
	s, url, c := startH2KeyIgnoringCharges(t, first, chargedIgnored)
	res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: url + "/api/v1/charge", ResultURL: url + "/api/v1/orders/o-1", Body: []byte(body)})
	requireOutcome(t, res, err, idem.StateSucceeded, nil, "pay_1", "")
	require.Equal(t, 1, s.charged())
	require.Equal(t, []string{body, ""}, s.streams(), "streams: the charge, then the status query")
	require.Equal(t, []bool{true, false}, s.carried("k1"), "the key on the charge (a query carries none)")

	rec, err := c.Record(t.Context(), idem.DefaultScope, "k1")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, rec.State)
	require.Len(t, rec.Attempts, 2, "journal: the charge and the query")
	require.Equal(t, journal.AttemptSubmit, rec.Attempts[0].Kind)
	require.False(t, rec.Attempts[0].Resent, "journal: the charge went out once")
	require.Equal(t, journal.AttemptQuery, rec.Attempts[1].Kind)
}

// The same first contact, the endpoint refusing the payment's second copy
// with its own 409 marked ignored, "Order with this id already paid"
// (ignoredStateConflict's answer: the order is paid, by the first copy).
// net/http's copy got it and idem, reading it as the answer to a first
// attempt, failed the payment (ErrFailed, one attempt): the caller, told
// nothing was charged, pays again. Now the 409 answers idem's resend of
// a copy that may have executed: unknown, ReviewKeyIgnored, one charge.
func TestKeyIgnoredEndpointHTTP2ProtocolErrorOnFirstContactThenAlreadyPaid(t *testing.T) {
	const body = `{"amount":100,"order_id":"o-1"}`
	s, url, c := startH2KeyIgnoringCharges(t, h2ProtocolErrorAfterCharge, func(int) (h2Answer, bool) {
		return h2Answer{status: "409", header: [][2]string{{"content-type", "application/json"}, {"idempotency-status", "ignored"}},
			body: `{"error":{"code":"2.09","message":"Order with this id already paid"}}`}, false
	})
	res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: url + "/api/v1/charge", Body: []byte(body)})
	requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrNeedsReview}, "", idem.ReviewKeyIgnored)
	require.NotErrorIs(t, err, idem.ErrFailed, "the first copy charged")
	require.Equal(t, 1, s.charged())
	require.Equal(t, []string{body, body}, s.streams(), "streams: the charge, then idem's resend")
	require.Equal(t, []bool{true, true}, s.carried("k1"), "the same key on both")

	requireChargeThenResend(t, c, journal.StateUnknown, idem.ReviewKeyIgnored)
}

// requireChargeThenResend fails unless k1 is journaled in state, flagged
// review, with two submits, the charge and idem's resend, neither sent
// twice by net/http.
func requireChargeThenResend(t *testing.T, c *idem.Client, state journal.State, review string) {
	t.Helper()
	rec, err := c.Record(t.Context(), idem.DefaultScope, "k1")
	require.NoError(t, err)
	require.Equal(t, state, rec.State)
	require.Equal(t, review, rec.Review)
	require.Len(t, rec.Attempts, 2, "journal: the charge and idem's resend")
	for _, a := range rec.Attempts {
		require.Equal(t, journal.AttemptSubmit, a.Kind)
		require.False(t, a.Resent, "journal: net/http sent none twice")
	}
}
