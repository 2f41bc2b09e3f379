package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// An endpoint that ignores the key (Solidgate: "check the
// Idempotency-Status value. A value of ignored means the endpoint does
// not", https://api-docs.solidgate.com/api/v2/idempotent-requests) over
// HTTP/2 takes a payment and then resets its stream PROTOCOL_ERROR.
// net/http's HTTP/2 transport sends a request again after a peer's
// PROTOCOL_ERROR (golang/go#47635: Go's server refuses a stream over its
// limit so), but only REFUSED_STREAM and a GOAWAY below the stream say
// that nothing ran: "The REFUSED_STREAM error code can be included in a
// RST_STREAM frame to indicate that the stream is being closed prior to
// any processing having occurred" (RFC 9113 8.7). Modelled: a front
// that resets a stream it already forwarded. Once the endpoint said it
// ignores the key, the payment goes out once: net/http's copy would be a
// second charge (before: 3 streams, pay_3 settled as the payment).
func TestKeyIgnoredEndpointHTTP2ProtocolErrorNotResent(t *testing.T) {
	const body = `{"amount":100}`
	ignored := func(id string) h2Answer {
		return h2Answer{status: "201", header: [][2]string{{"content-type", "application/json"}, {"idempotency-status", "ignored"}},
			body: `{"id":"` + id + `","status":"settled"}`}
	}
	s, url, hc := startRawH2(t, ignored("pay_1"), h2Answer{protocolError: true}, ignored("pay_3"))
	c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url + "/api/v1/charge", Body: []byte(body)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)

	res, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: url + "/api/v1/charge", Body: []byte(body)})
	requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrNeedsReview}, "", idem.ReviewKeyIgnored)
	require.Equal(t, 1, res.Attempts)
	require.Equal(t, []string{body, body}, s.streams(), "streams: k0's charge and k's, never net/http's copy of k's")
}
