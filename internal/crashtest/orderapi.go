package crashtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// BehaviorOptions returns the client options a server behaviour needs
// beyond the result endpoint, as idem's README tells users to configure
// such a server: none for an Idempotency-Key middleware; for an order API
// whose key is a client order id in the body (idemtest.ClientOrderID),
// idem.WithKeyInBody and a Decoder that reads its orders (DecodeOrder),
// which DecodeJSON does not (README, "With the key in the body";
// ExampleWithDecoder_clientOrderID). The retry settings stay the
// defaults.
func BehaviorOptions(b idemtest.Behavior) []idem.Option {
	if b.KeyMember == "" {
		return nil
	}
	return []idem.Option{idem.WithKeyInBody(), idem.WithDecoder(DecodeOrder)}
}

// DecodeOrder reads an order of Binance's spot API, as the order API of
// idemtest.ClientOrderID answers a submit and a result query: its
// "orderId", "clientOrderId" and "status" (developers.binance.com, Spot
// API, "Trading endpoints" and "ENUM definitions"). It is idem's
// ExampleWithDecoder_clientOrderID: another order's answer proves
// nothing, and a placed order is succeeded whatever became of it since.
func DecodeOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		OrderID       int64  `json:"orderId"`
		ClientOrderID string `json:"clientOrderId"`
		Status        string `json:"status"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, fmt.Errorf("order: %w", err)
	}
	if v.OrderID <= 0 || v.ClientOrderID != a.Key {
		return idem.Outcome{}, fmt.Errorf("order: not the order with clientOrderId %q", a.Key)
	}
	id := strconv.FormatInt(v.OrderID, 10)
	switch v.Status {
	case "REJECTED":
		return idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: v.Status}, nil
	case "PENDING_NEW":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: id}, nil
	case "", "NEW", "PARTIALLY_FILLED", "FILLED", "CANCELED", "PENDING_CANCEL", "EXPIRED", "EXPIRED_IN_MATCH":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, nil
	}
	return idem.Outcome{}, fmt.Errorf("order: status %q settles nothing", v.Status)
}

// LoseFirstOrder drops the answer to the first order placed through it,
// after the server has placed it: a connection reset on the way back.
type LoseFirstOrder struct {
	Base http.RoundTripper
	lost atomic.Bool
}

// RoundTrip sends r through Base, and for the first submit answered
// closes the answer and returns a transport error instead.
func (l *LoseFirstOrder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.Base.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && l.lost.CompareAndSwap(false, true) {
		_ = resp.Body.Close()
		return nil, errors.New("connection reset by peer")
	}
	return resp, err
}
