package idem_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

// krakenFutures is Kraken Futures' POST /derivatives/api/v3/sendorder
// (docs.kraken.com, Send order): a form body whose cliOrdId is unique
// across the account's history, answered 200 OK with "result":"success"
// whatever became of the order, which sendStatus.status says: "placed",
// or the refusal's name, "clientOrderIdAlreadyExist" for an id it holds
// (its sendStatus values, as JKorf/Kraken.Net's KrakenFuturesOrderPlaceStatus
// and nautilus_kraken's KrakenSendStatus list them). Its order lookup is
// a signed POST (/orders/status), so no result endpoint.
//
// The first create places a resting limit order; then its answer is lost
// (heldKeys).
func krakenFutures() *heldKeys {
	return &heldKeys{
		keyOf: formField("cliOrdId"),
		refusal: func(string) string {
			return `{"result":"success","sendStatus":{"status":"clientOrderIdAlreadyExist","receivedTime":"2026-12-05T11:00:00.000Z"},"serverTime":"2026-12-05T11:00:00.000Z"}`
		},
	}
}

// decodeKrakenFutures reads sendorder's answer as a user writes it: the
// order placed settles it, and any other sendStatus is Kraken's refusal
// of the order, failed with its name ("result" is "success" for those
// too, so the status is all there is to read).
func decodeKrakenFutures(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		SendStatus struct {
			OrderID string `json:"order_id"`
			Status  string `json:"status"`
		} `json:"sendStatus"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case v.SendStatus.Status == "placed" && v.SendStatus.OrderID != "":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.SendStatus.OrderID}, nil
	case v.SendStatus.Status == "":
		return idem.Outcome{}, errors.New("kraken futures: no sendStatus")
	}
	return idem.Outcome{State: idem.StateFailed, Reason: v.SendStatus.Status}, nil
}

const krakenFuturesOrder = "orderType=lmt&symbol=PF_XBTUSD&side=buy&size=1&limitPrice=40000&cliOrdId=694c2b62-0e3f-412b-8249-9e67428574ca"

func krakenFuturesRequest(base string) idem.Request {
	return idem.Request{Key: "694c2b62-0e3f-412b-8249-9e67428574ca", URL: base + "/derivatives/api/v3/sendorder",
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(krakenFuturesOrder)}
}

// Kraken Futures refuses a cliOrdId it holds 200 OK with no error member,
// its refusal's name in sendStatus.status: "clientOrderIdAlreadyExist".
// To the resend after a lost answer, the decoder read it as failed and
// Submit returned ErrFailed while the order rested on the book, inviting
// it again under a new id. It says the order under the id exists, as
// Bybit's 110072 does: left for a person (ReviewRefusedAfterSend), one
// order, every create the same bytes.
func TestClientOrderIDAlreadyExistToAResendIsNoFailure(t *testing.T) {
	requireHeldKeyResendForAPerson(t, krakenFutures(), decodeKrakenFutures, krakenFuturesRequest)
}

// The same refusal to idem's first attempt answers its sidecar's copy
// (Istio retries a 503 reset before headers): the order is ours, flagged
// for a person (ReviewKeyInUse), never failed nor resent.
func TestClientOrderIDAlreadyExistToAFirstAttemptBehindAMesh(t *testing.T) {
	requireHeldKeyFirstAttemptForAPerson(t, krakenFutures(), decodeKrakenFutures, krakenFuturesRequest, "clientOrderIdAlreadyExist")
}
