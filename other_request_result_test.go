package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// heldKeyServer holds, under the key, a result it answers on its result
// endpoint whoever asks; the submit's connection drops after the request
// is written and before anything is placed, so the only request the key's
// result can describe is an earlier one that used the key first.
type heldKeyServer struct {
	result string // the result endpoint's 200 body

	mu     sync.Mutex
	asked  []string // method and request URI of each request
	bodies []string // each submit's body
	keys   []string // each submit's Idempotency-Key header
	// queryErrs: each result query's error, as the Attempt hook saw it.
	queryErrs []string
}

func (s *heldKeyServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.asked = append(s.asked, r.Method+" "+r.URL.RequestURI())
	if r.Method == http.MethodPost {
		s.bodies = append(s.bodies, string(b))
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	}
	s.mu.Unlock()
	if r.Method == http.MethodPost {
		dropConnection(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, s.result)
}

// A result query by key can find what another request left under the key:
// a client order id is unique among open orders only (Binance's
// newClientOrderId, "a unique id among open orders"; developers.binance.com,
// Spot API, New order), so an id taken from a business id is free again
// once an earlier order under it has filled, and GET /api/v3/order?
// origClientOrderId= answers that old order; or two services sharing one
// account (Alpaca's client_order_id, one key space per account) or one
// idempotency key space (a key derived from a business id reused with
// another amount: the server stores the first request's result under the
// key and serves it by key, as DESIGN's fake server does) make the key
// another request's first. When the new request's answer is lost, the
// query answers the other request's order, whose side, symbol, quantity,
// amount or currency are not ours: idem settled the new intent succeeded
// with it (an order perhaps never placed, or placed and never known), or,
// in a shape no decoder read, held it processing on the old order until
// the reconciliation deadline.
// An answer that describes a request other than the one journaled is
// the key's result for another request: flagged ReviewKeyInUse, never
// settled, never resent (one submit, Resume only asks again). The same
// request in another spelling (numbers' digits, letters' case, members
// on one side only, Binance's origQty for the quantity sent) settles.
func TestResultQueryFindingAnotherRequestIsNotOurs(t *testing.T) {
	binanceForm := "symbol=BTCUSDT&side=BUY&type=MARKET&quantity=1&newClientOrderId=ord-9"
	alpacaJSON := `{"symbol":"AAPL","qty":"10","side":"buy","type":"market","time_in_force":"day","client_order_id":"ord-9"}`
	stripeForm := "amount=2000&currency=usd&payment_method=pm_card_visa&confirm=true"
	for _, tt := range []struct {
		name    string
		header  bool // the key in the Idempotency-Key header, not the body
		decode  func(*idem.Answer) (idem.Outcome, error)
		path    string
		query   string
		body    string
		result  string
		theirs  bool   // the result is another request's: flagged
		orderID string // otherwise: settled with this resource
	}{
		{name: "binance: an old filled SELL under the id", decode: decodeSpotOrder,
			path: "/api/v3/order", query: "/api/v3/order?symbol=BTCUSDT&origClientOrderId={key}", body: binanceForm,
			result: `{"symbol":"BTCUSDT","orderId":4017,"orderListId":-1,"clientOrderId":"ord-9","price":"0.00000000","origQty":"1.00000000",` +
				`"executedQty":"1.00000000","status":"FILLED","timeInForce":"GTC","type":"MARKET","side":"SELL"}`,
			theirs: true},
		{name: "binance: an old filled order of another quantity under the id", decode: decodeSpotOrder,
			path: "/api/v3/order", query: "/api/v3/order?symbol=BTCUSDT&origClientOrderId={key}", body: binanceForm,
			result: `{"symbol":"BTCUSDT","orderId":4017,"orderListId":-1,"clientOrderId":"ord-9","price":"0.00000000","origQty":"0.25000000",` +
				`"executedQty":"0.25000000","status":"FILLED","timeInForce":"GTC","type":"MARKET","side":"BUY"}`,
			theirs: true},
		{name: "binance without a decoder: an old filled SELL found unread under the id",
			path: "/api/v3/order", query: "/api/v3/order?symbol=BTCUSDT&origClientOrderId={key}", body: binanceForm,
			result: `{"symbol":"BTCUSDT","orderId":4017,"orderListId":-1,"clientOrderId":"ord-9","price":"0.00000000","origQty":"1.00000000",` +
				`"executedQty":"1.00000000","status":"FILLED","timeInForce":"GTC","type":"MARKET","side":"SELL"}`,
			theirs: true},
		{name: "binance: our order, its numbers in the engine's digits", decode: decodeSpotOrder,
			path: "/api/v3/order", query: "/api/v3/order?symbol=BTCUSDT&origClientOrderId={key}", body: binanceForm,
			result: `{"symbol":"BTCUSDT","orderId":4018,"orderListId":-1,"clientOrderId":"ord-9","price":"0.00000000","origQty":"1.00000000",` +
				`"executedQty":"1.00000000","status":"FILLED","timeInForce":"GTC","type":"MARKET","side":"BUY"}`,
			orderID: "4018"},
		{name: "alpaca: another service's order under the id",
			path: "/v2/orders", query: "/v2/orders:by_client_order_id?client_order_id={key}", body: alpacaJSON,
			result: `{"id":"61e69015-8549-4bfd-b9c3-01e75843f47d","client_order_id":"ord-9","symbol":"TSLA","qty":"10","side":"buy","type":"market","status":"filled"}`,
			theirs: true},
		{name: "alpaca: our order, its case and digits its own",
			path: "/v2/orders", query: "/v2/orders:by_client_order_id?client_order_id={key}", body: alpacaJSON,
			result:  `{"id":"61e69015-8549-4bfd-b9c3-01e75843f47d","client_order_id":"ord-9","symbol":"aapl","qty":"10.000","side":"BUY","type":"market","status":"filled","filled_avg_price":"231.5"}`,
			orderID: "61e69015-8549-4bfd-b9c3-01e75843f47d"},
		{name: "header key: another amount's payment stored under the key", header: true,
			path: "/v1/payment_intents", query: "/v1/results/{key}", body: stripeForm,
			result: `{"id":"pi_3Theirs","object":"payment_intent","amount":5000,"currency":"usd","status":"succeeded"}`,
			theirs: true},
		{name: "header key: another currency's payment stored under the key", header: true,
			path: "/v1/payment_intents", query: "/v1/results/{key}", body: stripeForm,
			result: `{"id":"pi_3Theirs","object":"payment_intent","amount":2000,"currency":"eur","status":"succeeded"}`,
			theirs: true},
		{name: "header key: our payment", header: true,
			path: "/v1/payment_intents", query: "/v1/results/{key}", body: stripeForm,
			result:  `{"id":"pi_3Ours","object":"payment_intent","amount":2000,"amount_received":2000,"currency":"USD","status":"succeeded"}`,
			orderID: "pi_3Ours"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &heldKeyServer{result: tt.result}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			opts := []idem.Option{idem.WithResultEndpoint(srv.URL + tt.query),
				idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
					if ev.Query {
						s.mu.Lock()
						defer s.mu.Unlock()
						s.queryErrs = append(s.queryErrs, fmt.Sprint(ev.Err))
					}
				}})}
			if !tt.header {
				opts = append(opts, idem.WithKeyInBody())
			}
			if tt.decode != nil {
				opts = append(opts, idem.WithDecoder(tt.decode))
			}
			c := clientFor(t, srv, idemtest.NewClock(epoch), opts...)
			req := idem.Request{Key: "ord-9", URL: srv.URL + tt.path, Body: []byte(tt.body)}
			if tt.body[0] != '{' {
				req.Header = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			}

			res, err := c.Submit(t.Context(), req)
			get := "GET " + strings.Replace(tt.query, "{key}", "ord-9", 1)
			if tt.theirs {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.ErrorIs(t, err, idem.ErrKeyConflict)
				require.NotErrorIs(t, err, idem.ErrFailed)
				require.Equal(t, idem.StateUnknown, res.State)
				require.Equal(t, idem.ReviewKeyInUse, res.Review)
				require.Empty(t, res.ResourceID)

				// Resume asks again, and resends nothing.
				sum, err := c.Resume(t.Context())
				require.NoError(t, err)
				require.Equal(t, idem.Summary{Visited: 1, Review: 1}, sum)
				op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
				require.NoError(t, err)
				require.Equal(t, idem.StateUnknown, op.State)
				require.Equal(t, idem.ReviewKeyInUse, op.Review)
				s.mu.Lock()
				require.Len(t, s.queryErrs, 2)
				for _, e := range s.queryErrs {
					require.Contains(t, e, "another request")
				}
				defer s.mu.Unlock()
				require.Equal(t, []string{"POST " + tt.path, get, get}, s.asked)
			} else {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, tt.orderID, res.ResourceID)
				require.Empty(t, res.Review)
				s.mu.Lock()
				defer s.mu.Unlock()
				require.Equal(t, []string{"POST " + tt.path, get}, s.asked)
			}
			// One submit, the same key and bytes.
			require.Equal(t, []string{tt.body}, s.bodies)
			if tt.header {
				require.Equal(t, []string{"ord-9"}, s.keys)
			}
		})
	}
}
