package idem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A redirect answered to a submit the origin ran: a 303 See Other to the
// order made (RFC 9110 15.4.4: the server processed the request and
// points at its result), or PayU GPO's order create, answered 302 with
// Location set to redirectUri and the order in its JSON body
// (https://developers.payu.com/en/restapi.html, "Creating a new order":
// "The HTTP status code of the response is 302 and Location header is set
// to redirectUri"). idem follows neither; with idem's own decoder, which
// finds no order in these bodies (PayU's id is at orderId), the operation
// is never failed, settled by the result endpoint when there is one, and
// otherwise left unknown after resends with the same key and bytes, which
// the server keeps to the one order (a PayU Decoder settles the 302:
// payu_order_redirect_test.go). A 307 or 308 to another
// host (a moved API) that never reached the origin is left unknown the
// same way, never failed.
func TestRedirectAnsweredToASubmit(t *testing.T) {
	payuBody := `{"status":{"statusCode":"SUCCESS"},"redirectUri":"https://merch-prod.snd.payu.com/pay/?orderId=WZHF5FFDRJ140731GUEST000P01&token=abc",` +
		`"orderId":"WZHF5FFDRJ140731GUEST000P01","extOrderId":"k"}`
	tests := []struct {
		name     string
		status   int
		location string
		header   http.Header
		body     string
		reached  bool
	}{
		{name: "303 to the order made", status: http.StatusSeeOther, location: "/orders/ord_000001", reached: true},
		{name: "PayU 302 with the order in its body", status: http.StatusFound,
			location: "https://merch-prod.snd.payu.com/pay/?orderId=WZHF5FFDRJ140731GUEST000P01&token=abc",
			header:   http.Header{"Content-Type": {"application/json;charset=UTF-8"}}, body: payuBody, reached: true},
		{name: "307 to another host", status: http.StatusTemporaryRedirect, location: "https://api2.example.com/orders"},
		{name: "308 to another host", status: http.StatusPermanentRedirect, location: "https://api2.example.com/v2/orders"},
	}
	for _, tc := range tests {
		for _, withResult := range []bool{true, false} {
			name := tc.name + ", no result endpoint"
			if withResult {
				name = tc.name + ", result endpoint"
			}
			t.Run(name, func(t *testing.T) {
				srv := newServer(t)
				f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
					if r.Method == http.MethodGet {
						return false
					}
					if tc.reached {
						forward() // the server's replay of the key, on resends
					}
					h := tc.header.Clone()
					if h == nil {
						h = http.Header{}
					}
					h.Set("Location", tc.location)
					page(w, tc.status, h, tc.body)
					return true
				})
				var c *idem.Client
				if withResult {
					c = f.client(t)
				} else {
					c = clientFor(t, f.Server, idemtest.NewClock(epoch))
				}
				res, err := c.Submit(t.Context(), f.req("k"))
				require.NotErrorIs(t, err, idem.ErrFailed)
				effects := 0
				if tc.reached {
					effects = 1
				}
				require.Equal(t, effects, srv.Effects("", "k"))
				for i, r := range srv.Requests() {
					require.Equalf(t, "k", r.Key, "request %d", i+1)
				}
				if withResult && tc.reached {
					require.NoError(t, err)
					require.Equal(t, idem.StateSucceeded, res.State)
					require.Equal(t, "ord_000001", res.ResourceID)
					require.Equal(t, 1, f.posts, "settled by the query, never resent")
					return
				}
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.Equal(t, idem.StateUnknown, res.State)
				require.Equal(t, idem.DefaultMaxAttempts, res.Attempts)
			})
		}
	}
}
