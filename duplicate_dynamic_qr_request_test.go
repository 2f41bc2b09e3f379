package idem_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

// payPayCodes is PayPay's Create a QRCode (POST /v2/codes), keyed by the
// merchant's merchantPaymentId: to one it holds it answers 400
// {"resultInfo":{"code":"DUPLICATE_DYNAMIC_QR_REQUEST","message":
// "Duplicate Dynamic QR request error","codeId":"01652073"}} (the error
// table of PayPay's OPA SDKs' READMes, paypay/paypayopa-sdk-*), never
// the code it made.
func payPayCodes() *heldKeys {
	return &heldKeys{
		status: http.StatusBadRequest,
		keyOf:  jsonMember("merchantPaymentId"),
		refusal: func(string) string {
			return `{"resultInfo":{"code":"DUPLICATE_DYNAMIC_QR_REQUEST","message":"Duplicate Dynamic QR request error","codeId":"01652073"},"data":null}`
		},
	}
}

// decodePayPayCode reads the answer as PayPay's SDKs do: resultInfo.code
// SUCCESS is the code made, any other PayPay's refusal.
func decodePayPayCode(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		ResultInfo struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"resultInfo"`
		Data struct {
			CodeID string `json:"codeId"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	if v.ResultInfo.Code == "SUCCESS" {
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data.CodeID}, nil
	}
	return idem.Outcome{State: idem.StateFailed, Reason: v.ResultInfo.Message + " (" + v.ResultInfo.Code + ")"}, nil
}

const payPayCode = `{"merchantPaymentId":"mp-7f3c9a","amount":{"amount":1000,"currency":"JPY"},"codeType":"ORDER_QR","orderDescription":"Pen"}`

func payPayCodeRequest(base string) idem.Request {
	return idem.Request{Key: "mp-7f3c9a", URL: base + "/v2/codes", Body: []byte(payPayCode)}
}

// PayPay's 400 to the resend after a lost answer: the code under the
// merchantPaymentId exists, for a person, never failed.
func TestDuplicateDynamicQRRequestToAResendIsNoFailure(t *testing.T) {
	requireHeldKeyResendForAPerson(t, payPayCodes(), decodePayPayCode, payPayCodeRequest)
}

// The same 400 to idem's first attempt answers its sidecar's copy: the
// code is ours, never failed nor resent. The attempt keeps the status
// only: the refusal's words are nested in resultInfo, where the
// summary of a 4xx's body does not look.
func TestDuplicateDynamicQRRequestToAFirstAttemptBehindAMesh(t *testing.T) {
	requireHeldKeyFirstAttemptForAPerson(t, payPayCodes(), decodePayPayCode, payPayCodeRequest, "400: Bad Request")
}
