package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// heldOrderBook is Coinbase Advanced Trade's POST /api/v3/brokerage/orders
// (docs.cdp.coinbase.com/api-reference/advanced-trade-api/rest-api/orders/create-order):
// for a client_order_id it already holds, "the order will not be created
// and the order corresponding with that ID will be returned instead", 200
// OK and "success": true as for a new order, nothing marking it. The
// answer names the order in success_response (order_id, product_id, side,
// client_order_id) beside the order_configuration. held: orders under
// their client_order_id before the test's create, placed by another
// service on the account. cutFirst: the first create's connection is cut
// after its order was placed.
type heldOrderBook struct {
	cutFirst bool
	// alias: the product id the book names in its answers for the one a
	// create asked for, as Coinbase names one order book by both its USD
	// and USDC product ids.
	alias map[string]string

	mu      sync.Mutex
	held    map[string]heldOrder
	placed  int      // orders the creates placed
	creates []string // each create's body
}

type heldOrder struct{ id, product, side string }

func (s *heldOrderBook) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct {
		ClientOrderID string          `json:"client_order_id"`
		ProductID     string          `json:"product_id"`
		Side          string          `json:"side"`
		Config        json.RawMessage `json:"order_configuration"`
	}
	_ = json.Unmarshal(b, &req)
	s.mu.Lock()
	s.creates = append(s.creates, string(b))
	o, ok := s.held[req.ClientOrderID]
	if !ok {
		s.placed++
		o = heldOrder{id: fmt.Sprintf("22222-00000-%06d", s.placed), product: req.ProductID, side: req.Side}
		if s.held == nil {
			s.held = map[string]heldOrder{}
		}
		s.held[req.ClientOrderID] = o
	}
	cut := s.cutFirst && len(s.creates) == 1
	if named, ok := s.alias[o.product]; ok {
		o.product = named
	}
	s.mu.Unlock()
	if cut {
		dropConnection(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"success":true,"success_response":{"order_id":%q,"product_id":%q,"side":%q,"client_order_id":%q},"order_configuration":%s}`,
		o.id, o.product, o.side, req.ClientOrderID, req.Config)
}

// A create answered with the order another request left under the client
// order id (a client_order_id derived from a business id and used again,
// or one shared with another service) was settled succeeded with that
// order: its side or product is not ours, and ours was never placed. Such
// an answer is now flagged ReviewKeyInUse, never settled and never resent.
// The order the key placed for us, answered fresh or again after a cut
// answer, settles as before.
func TestCoinbaseCreateAnsweredWithAnotherRequestsHeldOrder(t *testing.T) {
	const body = `{"client_order_id":"ord-9","product_id":"BTC-USD","side":"BUY","order_configuration":{"market_market_ioc":{"quote_size":"10"}}}`
	for _, tt := range []struct {
		name     string
		held     *heldOrder
		cutFirst bool
		creates  int
		placed   int
		ours     bool   // settles succeeded with the order placed for us
		names    string // what the attempt's error names of the held order
	}{
		{name: "another service's ETH sell under the id", held: &heldOrder{"0000-their-sell", "ETH-USD", "SELL"},
			creates: 1, names: `product_id "ETH-USD"`},
		{name: "another request's sell of the same product", held: &heldOrder{"0000-their-sell", "BTC-USD", "SELL"},
			creates: 1, names: `side "SELL"`},
		{name: "our order, placed fresh", creates: 1, placed: 1, ours: true},
		{name: "our order, answered again after a cut answer", cutFirst: true, creates: 2, placed: 1, ours: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &heldOrderBook{cutFirst: tt.cutFirst}
			if tt.held != nil {
				s.held = map[string]heldOrder{"ord-9": *tt.held}
			}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			var attemptErrs []string
			hooks := idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
				s.mu.Lock()
				defer s.mu.Unlock()
				attemptErrs = append(attemptErrs, fmt.Sprint(ev.Err))
			}})
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeCoinbase), hooks)
			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/api/v3/brokerage/orders",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
			op, lerr := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
			require.NoError(t, lerr)
			if tt.ours {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "22222-00000-000001", res.ResourceID)
				require.Empty(t, op.Review)
			} else {
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.ErrorIs(t, err, idem.ErrKeyConflict)
				require.Equal(t, idem.ReviewKeyInUse, res.Review)
				require.Equal(t, idem.StateUnknown, res.State)
				require.Equal(t, idem.ReviewKeyInUse, op.Review)
				require.Equal(t, idem.StateUnknown, op.State)
			}
			require.Equal(t, tt.creates, op.Attempts, "attempts: the creates, no result query")
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Len(t, s.creates, tt.creates, "creates")
			for _, b := range s.creates {
				require.Equal(t, body, b, "every create carries the key and the same bytes")
			}
			require.Equal(t, tt.placed, s.placed, "orders placed")
			if !tt.ours {
				require.Len(t, attemptErrs, 1)
				require.Contains(t, attemptErrs[0], tt.names, "the attempt names the held order's member")
			}
		})
	}
}

// A fresh order's 200 that echoes our order in its own spelling is ours:
// Binance's New order (POST /api/v3/order, newOrderRespType RESULT,
// developers.binance.com/docs/binance-spot-api-docs/rest-api/trading-endpoints)
// answers the order placed with its price and quantity as strings of
// eight decimals, the quantity as origQty, and members the request left
// to defaults (timeInForce, status). Nothing in it differs from the
// form sent: settled succeeded, one create.
func TestFreshOrderAnswerEchoingOurOrderSettles(t *testing.T) {
	const form = "symbol=BTCUSDT&side=BUY&type=LIMIT&timeInForce=GTC&quantity=0.01&price=60000&newClientOrderId=ord-9"
	var mu sync.Mutex
	var creates []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		creates = append(creates, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"symbol":"BTCUSDT","orderId":28,"orderListId":-1,"clientOrderId":"ord-9","transactTime":1507725176595,`+
			`"price":"60000.00000000","origQty":"0.01000000","executedQty":"0.00000000","cummulativeQuoteQty":"0.00000000",`+
			`"status":"NEW","timeInForce":"GTC","type":"LIMIT","side":"BUY","workingTime":1507725176595,"selfTradePreventionMode":"NONE"}`)
	}))
	t.Cleanup(srv.Close)
	decode := func(a *idem.Answer) (idem.Outcome, error) {
		var v struct {
			OrderID       int64  `json:"orderId"`
			ClientOrderID string `json:"clientOrderId"`
			Status        string `json:"status"`
		}
		if err := json.Unmarshal(a.Body, &v); err != nil || v.ClientOrderID != a.Key {
			return idem.Outcome{}, fmt.Errorf("binance: not the order %q", a.Key)
		}
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: fmt.Sprint(v.OrderID)}, nil
	}
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decode))
	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/api/v3/order",
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(form)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "28", res.ResourceID)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{form}, creates)
}
