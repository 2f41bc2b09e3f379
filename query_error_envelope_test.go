package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// bybitOrders is Bybit's v5 order API as documented (bybit-exchange.github.io/docs/v5):
// every answer is 200 OK with an envelope whose "retCode" says how the
// request went, 0 for success. POST /v5/order/create takes a JSON body
// with orderLinkId, the client's order id, and answers {"retCode":0,
// "retMsg":"OK","result":{"orderId":…,"orderLinkId":…}}; GET
// /v5/order/realtime?…&orderLinkId=… answers the orders it holds under
// that id in "result"."list", an empty list for none. A limit reached is
// {"retCode":10006,"retMsg":"Too many visits","result":{},…}, still 200
// OK (donewiththedollar/directionalscalper#57), and the order endpoints'
// limits are counted apart, so a query may be refused while a create is
// taken. The first create's connection drops before its answer is out.
type bybitOrders struct {
	notPlaced  bool     // the first create is lost before it is placed
	queryFails []string // the first queries' bodies, each 200 OK

	mu      sync.Mutex
	orders  []string // the orderLinkId of each order placed
	creates int
}

func (x *bybitOrders) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method == http.MethodGet {
		if len(x.queryFails) > 0 {
			body := x.queryFails[0]
			x.queryFails = x.queryFails[1:]
			_, _ = io.WriteString(w, body)
			return
		}
		id := r.URL.Query().Get("orderLinkId")
		list := "[]"
		if n := slices.Index(x.orders, id); n >= 0 {
			list = fmt.Sprintf(`[{"orderId":"1f0e-%d","orderLinkId":%q,"symbol":"BTCUSDT","side":"Buy","orderType":"Market",`+
				`"qty":"0.010","cumExecQty":"0.010","orderStatus":"Filled","timeInForce":"IOC"}]`, n+1, id)
		}
		_, _ = fmt.Fprintf(w, `{"retCode":0,"retMsg":"OK","result":{"category":"spot","nextPageCursor":"","list":%s},"retExtInfo":{},"time":1764936000000}`, list)
		return
	}
	var order struct {
		OrderLinkID string `json:"orderLinkId"`
	}
	_ = json.Unmarshal(b, &order)
	x.creates++
	if x.creates > 1 || !x.notPlaced {
		x.orders = append(x.orders, order.OrderLinkID)
	}
	if x.creates == 1 {
		dropConnection(w)
		return
	}
	_, _ = fmt.Fprintf(w, `{"retCode":0,"retMsg":"OK","result":{"orderId":"1f0e-%d","orderLinkId":%q},"retExtInfo":{},"time":1764936000000}`,
		len(x.orders), order.OrderLinkID)
}

// submit serves x and submits to it order "ord-9", a market buy its key
// in the body names (orderLinkId), queried at its realtime endpoint.
func (x *bybitOrders) submit(t *testing.T, clock *idemtest.Clock) (*idem.Client, *idem.Result, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(),
		idem.WithResultEndpoint(srv.URL+"/v5/order/realtime?category=spot&symbol=BTCUSDT&orderLinkId={key}"))
	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/v5/order/create",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"category":"spot","symbol":"BTCUSDT","side":"Buy","orderType":"Market","qty":"0.010","orderLinkId":"ord-9"}`)})
	return c, res, err
}

// A result query answered 200 OK with an error in its envelope (Bybit's
// retCode 10006, a limit on the queries reached) says nothing of the
// order, as a 500 does not: it holds no "error" member, and was read as a
// search that found nothing, so the client order id was sent again. An
// exchange whose id is free again once its order has filled (Binance's
// newClientOrderId), or that no longer checks its ids are unique (HTX's
// clientOrderId since its notice of 27 April 2021), places it twice.
// Such an answer is a failed query, asked again; one whose code is a
// success and whose list is empty still lets the resend go, once
// DefaultResultLag has passed since the order was sent (a read path
// behind its engine finds nothing either): by Resume after the lag.
func TestErrorEnvelopeToAResultQueryIsNoAnswerAboutTheOrder(t *testing.T) {
	tooMany := `{"retCode":10006,"retMsg":"Too many visits","result":{},"retExtInfo":{},"time":1693924869139}`
	for _, tt := range []struct {
		name      string
		notPlaced bool
		creates   int
	}{
		{name: "placed", creates: 1},
		{name: "not placed: asked again, then resent after the lag", notPlaced: true, creates: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &bybitOrders{notPlaced: tt.notPlaced, queryFails: []string{tooMany}}
			clock := idemtest.NewClock(epoch)
			c, res, err := x.submit(t, clock)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			if tt.notPlaced {
				require.Equal(t, idem.StateUnknown, res.State)
				x.mu.Lock()
				require.Empty(t, x.orders, "orders within the lag")
				require.Equal(t, 1, x.creates, "creates within the lag")
				x.mu.Unlock()
				clock.Advance(idem.DefaultResultLag)
				sum, err := c.Resume(t.Context())
				require.NoError(t, err)
				require.Equal(t, idem.Summary{Visited: 1, Processing: 1}, sum)
				op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
				require.NoError(t, err)
				res.State = op.State
			}
			// Found in Bybit's envelope, which DecodeJSON does not read:
			// held processing (TestFoundOrderInAnUnreadShapeIsNeverResent).
			require.Equal(t, idem.StateProcessing, res.State)

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{"ord-9"}, x.orders, "orders")
			require.Equal(t, tt.creates, x.creates, "creates")
		})
	}
}
