package idem_test

import (
	"context"
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

// chasedBook is Bybit's v5 order API for one linear limit order under a
// market maker's price chase: POST /v5/order/create answers
// {"retCode":0,"result":{"orderId","orderLinkId"}} (placed, nothing said
// of its state), GET /v5/order/realtime?orderLinkId= answers the order in
// result.list, and the chase's POST /v5/order/amend moves the resting
// order's price in place as soon as the book moves, before idem's first
// query: same orderId, same orderLinkId
// (bybit-exchange.github.io/docs/v5/order/amend-order; Binance's futures
// Modify Order keeps the clientOrderId alike).
type chasedBook struct {
	queryID string // the orderId the realtime query answers
	orderLog
}

// orderLog is what an order API's fake saw: its creates and result
// queries, and each query's error as the Attempt hook (queryHook) saw it.
type orderLog struct {
	mu        sync.Mutex
	creates   []string // each create's body
	queries   int
	queryErrs []string
}

// queryHook records each result query's error in queryErrs.
func (l *orderLog) queryHook() idem.Option {
	return idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
		if ev.Query {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.queryErrs = append(l.queryErrs, fmt.Sprint(ev.Err))
		}
	}})
}

const chasedOrderID = "1321003749386327552"

func (s *chasedBook) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v5/order/create":
		s.creates = append(s.creates, string(b))
		_, _ = fmt.Fprintf(w, `{"retCode":0,"retMsg":"OK","result":{"orderId":%q,"orderLinkId":"ord-9"},"retExtInfo":{},"time":1733400000000}`, chasedOrderID)
	case "/v5/order/realtime":
		s.queries++
		// Amended from 60000 to 60100 by the chase.
		_, _ = fmt.Fprintf(w, `{"retCode":0,"retMsg":"OK","result":{"category":"linear","nextPageCursor":"","list":[{"orderId":%q,`+
			`"orderLinkId":"ord-9","symbol":"BTCUSDT","price":"60100","qty":"0.010","side":"Buy","orderStatus":"New","orderType":"Limit",`+
			`"timeInForce":"GTC","avgPrice":"","leavesQty":"0.010","cumExecQty":"0"}]},"retExtInfo":{},"time":1733400000000}`, s.queryID)
	default:
		http.NotFound(w, r)
	}
}

// Since 8db63a2 a result query's answer whose price or quantity is not the
// journaled body's is another request's. But our own create's answer named
// the order the server made for the key, and idem held it processing to
// ask how it went. A resting order is amended in place by whoever trades
// it, so its price then differs from the one sent while the order is ours:
// it was flagged ReviewKeyInUse, a person left to settle every order a
// price chase touched before idem asked. An answer naming the held order
// is ours, whatever its price now; another order under the key is still
// another request's.
func TestAmendedHeldOrderIsStillOurs(t *testing.T) {
	for _, tt := range []struct {
		name    string
		queryID string
		theirs  bool
	}{
		{name: "the held order, amended", queryID: chasedOrderID},
		{name: "another order under the key", queryID: "1321003749386320000", theirs: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &chasedBook{queryID: tt.queryID}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeBybitOrder),
				idem.WithResultEndpoint(srv.URL+"/v5/order/realtime?category=linear&orderLinkId={key}"), s.queryHook())
			body := `{"category":"linear","symbol":"BTCUSDT","side":"Buy","orderType":"Limit","qty":"0.010","price":"60000","timeInForce":"GTC","orderLinkId":"ord-9"}`
			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/v5/order/create", Body: []byte(body)})
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, []string{body}, s.creates, "one create, its bytes")
			require.Equal(t, 1, s.queries)
			require.Len(t, s.queryErrs, 1)
			if tt.theirs {
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.ErrorIs(t, err, idem.ErrKeyConflict)
				require.Equal(t, idem.ReviewKeyInUse, res.Review)
				require.Contains(t, s.queryErrs[0], "another request")
				return
			}
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, chasedOrderID, res.ResourceID)
			require.Empty(t, res.Review)
			require.Equal(t, "<nil>", s.queryErrs[0])
		})
	}
}
