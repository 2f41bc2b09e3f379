package idem_test

import (
	"encoding/json"
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

// gopaxExchange is GOPAX's order API (gopax.github.io/API): POST /orders
// takes a JSON order with the caller's clientOrderId, GET
// /orders/clientOrderId/<ClientOrderId> answers the order it placed, and
// an id no order holds with error 10221, "No such client order ID", in
// GOPAX's error body ({"errorMessage":"No such order ID","errorCode":
// 10069,"errorData":"73152094"} for an order id: ccxt/ccxt js/gopax.js,
// which maps 10221 to OrderNotFound). The first order's connection drops
// before it reaches the engine, or, with placedFirst, after the engine
// placed it. While lagging the read path has not caught up with the
// engine: it holds no order.
type gopaxExchange struct {
	status      int // of the 10221 answer
	placedFirst bool
	lagging     bool

	mu     sync.Mutex
	orders []string // each order's clientOrderId
	posts  int
}

func (x *gopaxExchange) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method == http.MethodGet {
		id := strings.TrimPrefix(r.URL.Path, "/orders/clientOrderId/")
		for n, o := range x.orders {
			if o == id && !x.lagging {
				_, _ = io.WriteString(w, gopaxOrder(n+1, id))
				return
			}
		}
		w.WriteHeader(x.status)
		_, _ = fmt.Fprintf(w, `{"errorMessage":"No such client order ID","errorCode":10221,"errorData":%q}`, id)
		return
	}
	x.posts++
	if x.posts == 1 && !x.placedFirst {
		dropConnection(w)
		return
	}
	var o struct {
		ClientOrderID string `json:"clientOrderId"`
	}
	_ = json.Unmarshal(b, &o)
	x.orders = append(x.orders, o.ClientOrderID)
	if x.posts == 1 {
		dropConnection(w)
		return
	}
	_, _ = io.WriteString(w, gopaxOrder(len(x.orders), o.ClientOrderID))
}

// gopaxOrder is a filled market buy as GOPAX answers it.
func gopaxOrder(n int, clientOrderID string) string {
	return fmt.Sprintf(`{"id":"%d","clientOrderId":%q,"status":"completed","forcedCompletionReason":"fullyFilled",`+
		`"tradingPairName":"BTC-KRW","side":"buy","type":"market","price":null,"stopPrice":null,"amount":10000,"remaining":0,`+
		`"protection":"no","timeInForce":"gtc","createdAt":"2026-11-29T12:00:00.000Z","updatedAt":"2026-11-29T12:00:00.000Z"}`,
		9870000+n, clientOrderID)
}

// gopaxMarketBuy is a market buy under the client order id ord-9, sent
// to the exchange at base.
func gopaxMarketBuy(base string) idem.Request {
	return idem.Request{Key: "ord-9", URL: base + "/orders",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"clientOrderId":"ord-9","tradingPairName":"BTC-KRW","side":"buy","type":"market","amount":10000}`)}
}

// decodeGopaxOrder reads a GOPAX order: placed, whatever its status, once
// it names the key as its clientOrderId.
func decodeGopaxOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		ID            string `json:"id"`
		ClientOrderID string `json:"clientOrderId"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.ID == "" || v.ClientOrderID != a.Key {
		return idem.Outcome{}, fmt.Errorf("gopax: not the order with clientOrderId %q", a.Key)
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.ID}, nil
}

// GOPAX's "No such client order ID" is its result endpoint's own "no such
// order": the client order id is the key. It was read as a "not found" of
// a client (missingOther took the word after "no such" for the subject),
// a query that told nothing, so an order lost before the engine was never
// resent: left unknown for a person. The subject of "no such" is the
// head of its phrase ("client order ID": the order's id), and the order
// is resent once the result lag has passed, once.
func TestGopaxNoSuchClientOrderIDIsTheOrdersNotFound(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			x := &gopaxExchange{status: status}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(decodeGopaxOrder),
				idem.WithResultEndpoint(srv.URL+"/orders/clientOrderId/{key}"))

			res, err := c.Submit(t.Context(), gopaxMarketBuy(srv.URL))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, idem.StateUnknown, res.State, "not found within the result lag: asked again, not resent")

			clock.Advance(idem.DefaultResultLag)
			requireResumeSettlesKey(t, c, "ord-9", "9870001")

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{"ord-9"}, x.orders, "orders placed")
			require.Equal(t, 2, x.posts, "orders sent: the lost one and its one resend")
		})
	}
}
