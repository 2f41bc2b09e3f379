package idem_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A result query refused because something else it names is unknown (the
// merchant or the API key the query is made with, a token) says nothing
// of the order: Cielo's query API answers an unknown MerchantId with
// {"Message":"Merchant not found"} (DeveloperCielo/API-3.0-Java#43,
// DeveloperCielo/API-3.0-PHP#231), AEON's with {"code":"8005","msg":
// "Merchant does not exist Merchant :…","success":false}
// (AEON-Project/GameOn-TON-Hackathon#20), an API gateway with "API key
// not found" or "Token not found" for a credential rotated between the
// order and its query. Its words hold "not found" or "does not exist",
// and it was taken for the endpoint's "no such order": with the client
// order id in the body, once the result lag had passed, Resume sent the
// filled order again, and two were placed. Now it is a query that told
// nothing: asked again, never resent. The order's own "not found"
// (Binance's -2013 "Order does not exist.") still lets a resend go.
func TestQueryNotFoundAboutSomethingElseIsNoAnswer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
	}{
		{name: "Cielo's unknown merchant", status: http.StatusBadRequest, body: `{"Message":"Merchant not found"}`},
		{name: "AEON's merchant that does not exist", status: http.StatusBadRequest,
			body: `{"code":"8005","msg":"Merchant does not exist Merchant :Pvfu987fd7ssfidOsaFdu9dsSiF","model":null,"success":false,"error":true}`},
		{name: "a gateway's unknown API key", status: http.StatusUnprocessableEntity, body: `{"error":"invalid_request","message":"API key not found"}`},
		{name: "a token that is not found", status: http.StatusBadRequest, body: `{"status":"error","message":"Token not found"}`},
		{name: "a 404 about the merchant", status: http.StatusNotFound, body: `{"Message":"Merchant not found"}`},
		// A 200 whose envelope carries the 404, as Midtrans answers an
		// order_id it never saw (modelled words).
		{name: "an envelope's 404 about the merchant", status: http.StatusOK, body: `{"status_code":"404","status_message":"Merchant not found"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requireQueryAnswerNeverResent(t, shape{status: tt.status, header: http.Header{"Content-Type": {"application/json"}}, body: tt.body})
		})
	}
}

// requireQueryAnswerNeverResent asserts that a filled order whose answer
// was lost, each of whose result queries is answered so, stays unknown
// after Submit and after a Resume past the result lag: asked again, never
// sent again.
func requireQueryAnswerNeverResent(t *testing.T, answer shape) {
	t.Helper()
	x := &spotExchange{queryFails: slices.Repeat([]shape{answer}, 4*idem.DefaultMaxAttempts)}
	c, clock, base := x.start(t)

	res, err := c.Submit(t.Context(), marketBuy(base))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)

	clock.Advance(idem.DefaultResultLag)
	requireResumeLeavesUnknown(t, c, "ord-9")

	x.requireOneOrder(t, 1)
}
