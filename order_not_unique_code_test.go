package idem_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// payuOrders is PayU GPO's order create, POST /api/v2_1/orders, for an
// order whose payMethods carry a stored card token: charged at once and
// answered 201 Created with "statusCode": "SUCCESS"; an extOrderId it
// holds is refused 400 ERROR_ORDER_NOT_UNIQUE, "Order already exists.
// This error may be caused by a not unique extOrderId parameter", a code
// the docs give no statusDesc beside (developers.payu.com, Status Codes).
// Behind the client's sidecar (Istio), the first create's answer is a
// 503 reset after the charge, and the sidecar sends its copy.
type payuOrders struct {
	mu      sync.Mutex
	orders  []string // the extOrderId of each order charged
	creates []string // each create's body
}

func (p *payuOrders) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var v struct {
		ExtOrderID string `json:"extOrderId"`
	}
	_ = json.Unmarshal(b, &v)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creates = append(p.creates, string(b))
	w.Header().Set("Content-Type", "application/json")
	if slices.Contains(p.orders, v.ExtOrderID) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"status":{"statusCode":"ERROR_ORDER_NOT_UNIQUE"}}`)
		return
	}
	p.orders = append(p.orders, v.ExtOrderID)
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
}

// decodePayUOrder reads the order create's answer as PayU's SDKs do (its
// status.statusCode, "SUCCESS" with the order's id).
func decodePayUOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Status struct {
			StatusCode string `json:"statusCode"`
		} `json:"status"`
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	if v.Status.StatusCode == "SUCCESS" && v.OrderID != "" {
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.OrderID}, nil
	}
	return idem.Outcome{}, errors.New("payu: " + v.Status.StatusCode)
}

const payuTokenOrder = `{"extOrderId":"ord-42","merchantPosId":"145227","currencyCode":"PLN","totalAmount":"21000",` +
	`"payMethods":{"payMethod":{"type":"CARD_TOKEN","value":"TOKC_XATB7DF8ACXYTVQIPLWTVPFRKQE"}},"recurring":"STANDARD"}`

// ERROR_ORDER_NOT_UNIQUE to idem's first attempt answers its sidecar's
// copy of a create that charged the card: the code alone was read as a
// plain 400 and the call ended ErrFailed, inviting the charge again under
// a new extOrderId. It says the order under the id exists: flagged for a
// person (ReviewKeyInUse), never failed nor resent.
func TestOrderNotUniqueCodeToAFirstAttemptBehindAMesh(t *testing.T) {
	p := &payuOrders{}
	sidecar := retryingSidecar(t, p.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodePayUOrder))

	requireLeftForAPerson(t, c, idem.Request{Key: "ord-42", URL: sidecar.URL + "/api/v2_1/orders", Body: []byte(payuTokenOrder)}, "400")

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, []string{"ord-42"}, p.orders, "orders charged")
	require.Equal(t, []string{payuTokenOrder, payuTokenOrder}, p.creates, "copies: ours and the sidecar's, nothing resent")
}
