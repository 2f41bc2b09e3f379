package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// returningBook is Coinbase Advanced Trade's order API as it answers a
// client_order_id it already holds: "If the ID provided is not unique, the
// order will not be created and the order with this ID will be returned
// instead" (POST /api/v3/brokerage/orders, client_order_id). Its create
// answer names the order made for the id, {"success":true,
// "success_response":{"order_id",...}}, nothing of its state; the result
// endpoint answers the order under the id, {"order":{...}}. The id was
// used first by another service trading on the same account: a SELL that
// has filled.
type returningBook struct{ orderLog }

const theirOrderID = "0000-their-sell"

func (s *returningBook) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v3/brokerage/orders":
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		s.creates = append(s.creates, string(b))
		_, _ = fmt.Fprintf(w, `{"success":true,"success_response":{"order_id":%q,"product_id":"BTC-USD","side":"SELL","client_order_id":"ord-9"}}`, theirOrderID)
	case "/api/v3/brokerage/orders/by_client_id":
		s.queries++
		_, _ = fmt.Fprintf(w, `{"order":{"order_id":%q,"product_id":"BTC-USD","side":"SELL","client_order_id":"ord-9","status":"FILLED","filled_size":"0.5"}}`, theirOrderID)
	default:
		http.NotFound(w, r)
	}
}

// decodeReturningOrder reads returningBook's answers: a create taken is
// processing on the order it names; the order's status says how it went.
func decodeReturningOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Success  bool `json:"success"`
		Response struct {
			OrderID string `json:"order_id"`
		} `json:"success_response"`
		Order struct {
			OrderID string `json:"order_id"`
			Status  string `json:"status"`
		} `json:"order"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch {
	case !a.Query && v.Success && v.Response.OrderID != "":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.Response.OrderID}, nil
	case a.Query && v.Order.Status == "FILLED":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Order.OrderID}, nil
	case a.Query && v.Order.Status == "OPEN":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.Order.OrderID}, nil
	}
	return idem.Outcome{}, fmt.Errorf("unread: %s", a.Body)
}

// Since 2f25dca an answer naming the order our own create's answer named
// is ours whatever its price or quantity, since a resting order is amended
// in place. But a create answered with the order already under the client
// order id names another request's order as if ours, and the query then
// found that order, a SELL, for our BUY: it settled succeeded with the
// other service's fill, our order never placed. No amendment changes an
// order's side or instrument: such an answer is another request's, held
// order or not. The create's answer names the SELL already: it is
// flagged there (the query that follows finds the SELL again), and the
// other service's order is named in the attempt's error, never journaled
// as ours (a webhook for its fill would settle our operation).
func TestExistingOrderReturnedForTheIDIsNotOurs(t *testing.T) {
	s := &returningBook{}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	var submitErrs []string
	hooks := idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !ev.Query {
			submitErrs = append(submitErrs, fmt.Sprint(ev.Err))
		}
	}})
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeReturningOrder),
		idem.WithResultEndpoint(srv.URL+"/api/v3/brokerage/orders/by_client_id?client_order_id={key}"), hooks)
	body := `{"client_order_id":"ord-9","product_id":"BTC-USD","side":"BUY","order_configuration":{"market_market_ioc":{"base_size":"0.5"}}}`
	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/api/v3/brokerage/orders", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.ReviewKeyInUse, res.Review)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Empty(t, res.ResourceID)

	op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyInUse, op.Review)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{body}, s.creates, "one create, its bytes")
	require.Equal(t, 1, s.queries)
	require.Len(t, submitErrs, 1)
	require.Contains(t, submitErrs[0], `side "SELL"`)
	require.Contains(t, submitErrs[0], theirOrderID, "the order is named for the person deciding")
}
