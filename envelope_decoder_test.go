package idem_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// With the decoder ExampleWithDecoder_envelope shows, an order placed on
// Bybit (bybitOrders: every answer 200 OK in its envelope) whose create's
// connection dropped settles succeeded once its order is found, sent
// once: whether the first queries find it or lag behind its engine
// (an empty list, asked again within DefaultResultLag), or are refused
// for a limit reached (retCode 10006) for the whole call and Resume
// finds it. One not placed is resent once the lag has passed, and that
// order settles it.
func TestEnvelopeDecoderSettlesTheOrderOnce(t *testing.T) {
	empty := `{"retCode":0,"retMsg":"OK","result":{"category":"spot","nextPageCursor":"","list":[]},"retExtInfo":{},"time":1764936000000}`
	tooMany := `{"retCode":10006,"retMsg":"Too many visits","result":{},"retExtInfo":{},"time":1764936000000}`
	for _, tt := range []struct {
		name       string
		notPlaced  bool
		queryFails []string
		resume     bool // the call ends unknown, Resume after the lag settles it
		creates    int
		order      string
	}{
		{name: "found at once", creates: 1, order: "1f0e-1"},
		{name: "first queries lag", queryFails: []string{empty, empty}, creates: 1, order: "1f0e-1"},
		{name: "queries refused for the whole call", queryFails: slices.Repeat([]string{tooMany}, idem.DefaultMaxAttempts-1),
			resume: true, creates: 1, order: "1f0e-1"},
		{name: "not placed", notPlaced: true, resume: true, creates: 2, order: "1f0e-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &bybitOrders{notPlaced: tt.notPlaced, queryFails: tt.queryFails}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(decodeBybitOrder),
				idem.WithResultEndpoint(srv.URL+"/v5/order/history?category=spot&orderLinkId={key}"))

			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/v5/order/create",
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   []byte(`{"category":"spot","symbol":"BTCUSDT","side":"Buy","orderType":"Market","qty":"0.010","orderLinkId":"ord-9"}`)})
			if tt.resume {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.Equal(t, idem.StateUnknown, res.State)
				x.mu.Lock()
				require.Equal(t, 1, x.creates, "creates within the call")
				x.mu.Unlock()
				clock.Advance(idem.DefaultResultLag)
				requireResumeSettles(t, c, tt.order)
			} else {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, tt.order, res.ResourceID)
			}

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{"ord-9"}, x.orders, "orders")
			require.Equal(t, tt.creates, x.creates, "creates")
		})
	}
}
