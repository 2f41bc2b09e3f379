package idem_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

// payuOrders is PayU GPO's order create, POST /api/v2_1/orders, for an
// order whose payMethods carry a stored card token: charged at once and
// answered 201 Created with "statusCode": "SUCCESS"; an extOrderId it
// holds is refused 400 ERROR_ORDER_NOT_UNIQUE, "Order already exists.
// This error may be caused by a not unique extOrderId parameter", a code
// the docs give no statusDesc beside (developers.payu.com, Status Codes).
// Behind the client's sidecar (Istio), the first create's answer is a
// 503 reset after the charge, and the sidecar sends its copy (heldKeys).
func payuOrders() *heldKeys {
	return &heldKeys{
		status:  http.StatusBadRequest,
		keyOf:   jsonMember("extOrderId"),
		refusal: func(string) string { return `{"status":{"statusCode":"ERROR_ORDER_NOT_UNIQUE"}}` },
	}
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

func payuTokenOrderRequest(base string) idem.Request {
	return idem.Request{Key: "ord-42", URL: base + "/api/v2_1/orders", Body: []byte(payuTokenOrder)}
}

// ERROR_ORDER_NOT_UNIQUE to idem's first attempt answers its sidecar's
// copy of a create that charged the card: the code alone was read as a
// plain 400 and the call ended ErrFailed, inviting the charge again under
// a new extOrderId. It says the order under the id exists: flagged for a
// person (ReviewKeyInUse), never failed nor resent.
func TestOrderNotUniqueCodeToAFirstAttemptBehindAMesh(t *testing.T) {
	requireHeldKeyFirstAttemptForAPerson(t, payuOrders(), decodePayUOrder, payuTokenOrderRequest, "400")
}
