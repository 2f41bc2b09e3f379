package idem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Bitvavo's 101 ("Unknown error. Operation may or may not have
// succeeded.") and 109 ("The matching engine did not respond in time. The
// operation may or may not have succeeded.",
// support.bitvavo.com/hc/de/articles/10122205636753-API-Fehlermeldungen)
// come with a 5xx: docs.bitvavo.com/docs/errors lists no 1xx code among
// its 400s, and bitvavo/java-bitvavo-api#15 shows 101 with HTTP 500. A
// 5xx is no refusal: the order placed behind it is read back by its
// clientOrderId and settles the call, never failed, never placed again.
// Passes as is: it pins that a create's 5xx with such words stays an
// answer that may have executed.
func TestBitvavoMayOrMayNotHaveSucceededIsAskedAbout(t *testing.T) {
	for _, tt := range []struct {
		name string
		ans  shape
	}{
		{name: "109 with a 500", ans: shape{status: http.StatusInternalServerError,
			body: `{"errorCode":109,"error":"The matching engine did not respond in time. Operation may or may not have succeeded."}`}},
		{name: "109 with a 503", ans: shape{status: http.StatusServiceUnavailable,
			body: `{"errorCode":109,"error":"The matching engine did not respond in time. Operation may or may not have succeeded."}`}},
		{name: "101 with a 500", ans: shape{status: http.StatusInternalServerError,
			body: `{"errorCode":101,"error":"Unknown error. Operation may or may not have succeeded."}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &bitvavoBook{status: "filled", side: "buy", first: &tt.ans}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeBitvavo),
				idem.WithResultEndpoint(srv.URL+"/v2/order?market=BTC-EUR&clientOrderId={key}"))
			res, err := c.Submit(t.Context(), bitvavoRequest(srv.URL))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "1be6d0df-d5dc-4b53-a250-3376f3b393e6", res.ResourceID)

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{bitvavoOrder}, x.posts, "one create, never resent")
			require.Len(t, x.queries, 1, "read back once")
		})
	}
}
