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

// coinbaseOrders is Coinbase Advanced Trade's POST
// /api/v3/brokerage/orders as documented (docs.cdp.coinbase.com, Create
// Order): client_order_id is the order's key, and "if the ID provided is
// not unique, the order will not be created and the order corresponding
// with that ID will be returned instead", 200 OK with "success": true and
// no mark of a replay. Its order lookups take Coinbase's order_id, so
// the client has no endpoint by client_order_id: a lost answer is settled
// by sending the id again. The first creates meet a fault after the
// order was placed (fault, once per create, for faults creates).
type coinbaseOrders struct {
	fault  func(w http.ResponseWriter)
	faults int

	mu      sync.Mutex
	orders  []string // the client_order_id of each order placed
	creates []string // each create's body
}

func (x *coinbaseOrders) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct {
		ClientOrderID string `json:"client_order_id"`
	}
	_ = json.Unmarshal(b, &req)
	x.mu.Lock()
	x.creates = append(x.creates, string(b))
	n := slices.Index(x.orders, req.ClientOrderID)
	if n < 0 {
		x.orders = append(x.orders, req.ClientOrderID)
		n = len(x.orders) - 1
	}
	faulty := len(x.creates) <= x.faults
	x.mu.Unlock()
	if faulty {
		x.fault(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"success":true,"success_response":{"order_id":"11111-00000-%06d","product_id":"BTC-USD","side":"BUY",`+
		`"client_order_id":%q},"order_configuration":{"market_market_ioc":{"quote_size":"10"}}}`, n+1, req.ClientOrderID)
}

// decodeCoinbase reads a Create Order answer of Coinbase Advanced Trade:
// the order in "success_response" when "success" is true, the refusal in
// "error_response" when it is false (INSUFFICIENT_FUND: nothing placed).
func decodeCoinbase(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Success         bool `json:"success"`
		SuccessResponse struct {
			OrderID       string `json:"order_id"`
			ClientOrderID string `json:"client_order_id"`
		} `json:"success_response"`
		ErrorResponse struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		} `json:"error_response"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case !v.Success && v.ErrorResponse.Error != "":
		return idem.Outcome{State: idem.StateFailed, Reason: v.ErrorResponse.Error + ": " + v.ErrorResponse.Message}, nil
	case !v.Success || v.SuccessResponse.OrderID == "" || v.SuccessResponse.ClientOrderID != a.Key:
		return idem.Outcome{}, fmt.Errorf("coinbase: not the order %q", a.Key)
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.SuccessResponse.OrderID}, nil
}

// An order API that answers a client order id it holds with that id's
// order (Coinbase Advanced Trade) is reconciled as a Stripe-like server
// is, by resending the same bytes: whatever went wrong after the order
// was placed (its connection cut, a 500 or a 503 after the commit, the
// whole call's budget spent and Resume after a restart), the order sent
// again comes back as the one placed, settled succeeded under its
// order_id; one order, and every create carries the same body.
func TestOriginalOrderAnsweredForAClientOrderIDSettlesOnce(t *testing.T) {
	cut := func(w http.ResponseWriter) {
		dropConnection(w)
	}
	status := func(code int, body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}
	}
	for _, tt := range []struct {
		name    string
		fault   func(w http.ResponseWriter)
		faults  int
		resumed bool // the call ends unknown, and Resume settles it
	}{
		{name: "connection cut after the order was placed", fault: cut, faults: 1},
		{name: "500 after the order was placed", fault: status(http.StatusInternalServerError,
			`{"error":"INTERNAL","code":13,"message":"internal error","details":[]}`), faults: 1},
		{name: "503 after the order was placed", fault: status(http.StatusServiceUnavailable,
			`{"error":"UNAVAILABLE","code":14,"message":"service unavailable","details":[]}`), faults: 1},
		{name: "cut for the whole call, settled by Resume", fault: cut, faults: idem.DefaultMaxAttempts, resumed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &coinbaseOrders{fault: tt.fault, faults: tt.faults}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeCoinbase))
			body := `{"client_order_id":"ord-9","product_id":"BTC-USD","side":"BUY","order_configuration":{"market_market_ioc":{"quote_size":"10"}}}`

			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/api/v3/brokerage/orders",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)})
			if tt.resumed {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				requireResumeSettles(t, c, "11111-00000-000001")
			} else {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "11111-00000-000001", res.ResourceID)
			}

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{"ord-9"}, x.orders, "orders")
			require.Equal(t, slices.Repeat([]string{body}, tt.faults+1), x.creates, "creates")
		})
	}
}
