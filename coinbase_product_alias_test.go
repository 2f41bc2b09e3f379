package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Coinbase trades a USD product and its USDC twin on one order book, and
// names either by the other: Get Product answers BTC-USD with "alias":
// "BTC-USD", "alias_to": ["BTC-USDC"]
// (docs.cdp.coinbase.com/api-reference/advanced-trade-api/rest-api/products/get-product),
// and what is asked of BTC-USDC comes back named BTC-USD ("Coinbase has
// merged orderbook/trading for USDC & USD pairs … consider /USD markets
// as alias for /USDC markets", github.com/ccxt/ccxt/issues/26465; "when
// you subscribe to any websocket channel for BTC-USDC, then the resulting
// stream actually mentions the pair as BTC-USD",
// forums.coinbasecloud.dev/t/the-mess-of-usd-and-usdc-pairs/5745). Our
// own fresh BTC-USDC order answered as BTC-USD was taken for another
// request's held order (ReviewKeyInUse) on the happy path. Now the two
// ids of one book are one product; another base still differs.
func TestCoinbaseOrderAnsweredUnderItsProductAlias(t *testing.T) {
	for _, tt := range []struct {
		name, product string
		alias         map[string]string
		cutFirst      bool
		creates       int
	}{
		{name: "a USDC order answered as USD", product: "BTC-USDC", alias: map[string]string{"BTC-USDC": "BTC-USD"}, creates: 1},
		{name: "a USD order answered as USDC", product: "ETH-USD", alias: map[string]string{"ETH-USD": "ETH-USDC"}, creates: 1},
		{name: "a USDC order answered as USD again after a cut answer", product: "BTC-USDC", alias: map[string]string{"BTC-USDC": "BTC-USD"},
			cutFirst: true, creates: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"client_order_id":"ord-9","product_id":%q,"side":"BUY","order_configuration":{"market_market_ioc":{"quote_size":"10"}}}`, tt.product)
			s := &heldOrderBook{cutFirst: tt.cutFirst, alias: tt.alias}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			var attemptErrs []error
			hooks := idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
				s.mu.Lock()
				defer s.mu.Unlock()
				attemptErrs = append(attemptErrs, ev.Err)
			}})
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeCoinbase), hooks)
			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/api/v3/brokerage/orders",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "22222-00000-000001", res.ResourceID)
			require.Empty(t, res.Review)
			op, lerr := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
			require.NoError(t, lerr)
			require.Equal(t, idem.StateSucceeded, op.State)
			require.Empty(t, op.Review)
			require.Equal(t, tt.creates, op.Attempts)
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 1, s.placed, "orders placed")
			require.Len(t, s.creates, tt.creates)
			for _, b := range s.creates {
				require.Equal(t, body, b, "every create carries the key and the same bytes")
			}
			require.NoError(t, attemptErrs[len(attemptErrs)-1], "the settling attempt names no other request")
		})
	}
}
