package idem_test

import (
	"encoding/json"
	"errors"
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

// bitvavoBook is Bitvavo's order API with its lookup: POST /v2/order
// places the order (its answer lost here: the connection drops after the
// order was placed), GET /v2/order?market=…&clientOrderId=… answers the
// order (orderId, market, clientOrderId, status, side, amount, price:
// docs.bitvavo.com/docs/rest-api/get-order) or, for an id no order of the
// market holds, 404 {"errorCode":240,"error":"No order found. Please be
// aware that simultaneously updating the same order may return this
// error."} (docs.bitvavo.com/docs/errors, HTTP 404; ccxt's bitvavo maps
// 240 to OrderNotFound). lagging: the first lookups do not find it yet.
type bitvavoBook struct {
	status  string // the order's status once placed: new, filled, canceled, rejected
	side    string // the side the order under the id has ("buy" is ours)
	lagging int
	// first: the create's answer, the order placed behind it; nil: its
	// connection drops.
	first *shape

	lostCreates // the lookups by clientOrderId
}

func (x *bitvavoBook) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method == http.MethodPost && x.first != nil {
		b, _ := io.ReadAll(r.Body)
		x.posts = append(x.posts, string(b))
		w.WriteHeader(x.first.status)
		_, _ = io.WriteString(w, x.first.body)
		return
	}
	id, ok := x.lookup(w, r, "clientOrderId")
	if !ok {
		return
	}
	if len(x.posts) == 0 || x.lagging > 0 {
		x.lagging--
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"errorCode":240,"error":"No order found. Please be aware that simultaneously updating the same order may return this error."}`)
		return
	}
	_, _ = fmt.Fprintf(w, `{"orderId":"1be6d0df-d5dc-4b53-a250-3376f3b393e6","market":"BTC-EUR","clientOrderId":%q,"created":1764936000000,`+
		`"updated":1764936000000,"status":%q,"side":%q,"orderType":"limit","amount":"0.1","amountRemaining":"0.1","price":"40000",`+
		`"onHold":"4010","onHoldCurrency":"EUR","filledAmount":"0","filledAmountQuote":"0","feePaid":"0","feeCurrency":"EUR",`+
		`"fills":[],"selfTradePrevention":"decrementAndCancel","visible":true,"timeInForce":"GTC","postOnly":false,"operatorId":543462}`,
		id, x.status, x.side)
}

// decodeBitvavo reads Bitvavo's order as a user writes it: an order the
// exchange holds settles the placement succeeded, whatever became of it
// since (filled, canceled), but a rejected one, which never rested; an
// error body proves nothing.
func decodeBitvavo(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		OrderID   string `json:"orderId"`
		Status    string `json:"status"`
		ErrorCode int    `json:"errorCode"`
		Error     string `json:"error"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case v.ErrorCode != 0 || v.OrderID == "":
		return idem.Outcome{}, fmt.Errorf("bitvavo: %d %s", v.ErrorCode, v.Error)
	case v.Status == "rejected":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.OrderID, Reason: "rejected"}, nil
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.OrderID}, nil
}

// lostCreates is the log of an API whose every create is taken and its
// answer lost (the connection drops after the server took it), and of
// its lookups, each by the key in one query parameter.
type lostCreates struct {
	mu      sync.Mutex
	posts   []string // each create's body
	queries []string // each lookup's key
}

// lookup logs r, x.mu held: a create (POST) it takes and drops the
// connection of, answering nothing (ok false); a lookup it answers the
// key of, in the query parameter param.
func (x *lostCreates) lookup(w http.ResponseWriter, r *http.Request, param string) (key string, ok bool) {
	b, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost {
		x.posts = append(x.posts, string(b))
		dropConnection(w)
		return "", false
	}
	key = r.URL.Query().Get(param)
	x.queries = append(x.queries, key)
	return key, true
}

// An order whose answer was lost is read back by its clientOrderId, with
// the market the id is unique in: whatever its status it is the one
// order, never placed again; a lookup that does not find it yet (240)
// is asked again, not followed by a resend; an order under the id on the
// other side is not ours (ReviewKeyInUse), and nothing is resent either.
func TestBitvavoOrderReadBackByClientOrderID(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  string
		side    string
		lagging int
		state   idem.State
		id      string
		review  string
		kinds   []error
	}{
		{name: "resting", status: "new", side: "buy", state: idem.StateSucceeded, id: "1be6d0df-d5dc-4b53-a250-3376f3b393e6"},
		{name: "filled, found after the read path caught up", status: "filled", side: "buy", lagging: 2,
			state: idem.StateSucceeded, id: "1be6d0df-d5dc-4b53-a250-3376f3b393e6"},
		{name: "canceled", status: "canceled", side: "buy", state: idem.StateSucceeded, id: "1be6d0df-d5dc-4b53-a250-3376f3b393e6"},
		{name: "rejected", status: "rejected", side: "buy", state: idem.StateFailed, id: "1be6d0df-d5dc-4b53-a250-3376f3b393e6",
			kinds: []error{idem.ErrFailed}},
		{name: "another order under the id", status: "new", side: "sell", state: idem.StateUnknown,
			review: idem.ReviewKeyInUse, kinds: []error{idem.ErrKeyConflict, idem.ErrNeedsReview}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &bitvavoBook{status: tt.status, side: tt.side, lagging: tt.lagging}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeBitvavo),
				idem.WithResultEndpoint(srv.URL+"/v2/order?market=BTC-EUR&clientOrderId={key}"))
			req := bitvavoRequest(srv.URL)

			res, err := c.Submit(t.Context(), req)
			if errors.Is(err, idem.ErrFailed) && tt.state != idem.StateFailed {
				t.Fatalf("the order placed was failed: %v", err)
			}
			requireOutcome(t, res, err, tt.state, tt.kinds, tt.id, tt.review)

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{bitvavoOrder}, x.posts, "one create, never resent")
			require.Len(t, x.queries, tt.lagging+1, "asked until found")
			for _, q := range x.queries {
				require.Equal(t, req.Key, q, "every lookup by the key")
			}
		})
	}
}
