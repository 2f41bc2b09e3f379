package idem_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idemkit/idem"
)

// linePayRequests is LINE Pay's Request API (POST /v3/payments/request),
// whose merchant orderId is unique: to an orderId it holds it answers 200
// OK with returnCode 1172, "There is a record of transaction with the
// same order number." (developers.line.biz/en/docs/line-pay/appendix,
// LINE Pay error codes). Its answers carry the outcome in returnCode,
// "0000" a success (enylin/line-pay-merchant's README sample).
func linePayRequests() *heldKeys {
	return &heldKeys{
		keyOf: jsonMember("orderId"),
		refusal: func(string) string {
			return `{"returnCode":"1172","returnMessage":"There is a record of transaction with the same order number."}`
		},
	}
}

// decodeLinePayRequest reads the answer as LINE Pay's clients do
// (enylin/line-pay-merchant's handlers): returnCode "0000" is the
// payment reserved, any other code LINE Pay's refusal.
func decodeLinePayRequest(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		ReturnCode    string `json:"returnCode"`
		ReturnMessage string `json:"returnMessage"`
		Info          struct {
			TransactionID json.Number `json:"transactionId"`
		} `json:"info"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	if v.ReturnCode == "0000" {
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Info.TransactionID.String()}, nil
	}
	return idem.Outcome{State: idem.StateFailed, Reason: fmt.Sprintf("%s (%s)", v.ReturnMessage, v.ReturnCode)}, nil
}

const linePayRequest = `{"amount":1000,"currency":"TWD","orderId":"order-7f3c9a","packages":[{"id":"pkg-1","amount":1000,` +
	`"products":[{"name":"Pen","quantity":2,"price":500}]}],"redirectUrls":{"confirmUrl":"https://shop.example/confirm",` +
	`"cancelUrl":"https://shop.example/cancel"}}`

func linePayPaymentRequest(base string) idem.Request {
	return idem.Request{Key: "order-7f3c9a", URL: base + "/v3/payments/request", Body: []byte(linePayRequest)}
}

// LINE Pay's 1172 to the resend after a lost answer says the orderId's
// transaction exists: never failed, for a person.
func TestLinePaySameOrderNumberToAResendIsNoFailure(t *testing.T) {
	requireHeldKeyResendForAPerson(t, linePayRequests(), decodeLinePayRequest, linePayPaymentRequest)
}

// The same 1172 to idem's first attempt answers its sidecar's copy.
func TestLinePaySameOrderNumberToAFirstAttemptBehindAMesh(t *testing.T) {
	requireHeldKeyFirstAttemptForAPerson(t, linePayRequests(), decodeLinePayRequest, linePayPaymentRequest,
		"There is a record of transaction with the same order number.")
}
