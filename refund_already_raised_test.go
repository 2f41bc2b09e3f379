package idem_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idemkit/idem"
)

// paytmRefunds is Paytm's Refund API, POST /refund/apply: the merchant's
// refId, "Unique Reference Id for refund transaction which is generated
// by merchant. Duplicate REFID will be rejected by the Paytm gateway"
// (business.paytm.com, Refund API). Every answer is 200 OK, its outcome
// in body.resultInfo: resultStatus PENDING, code 601, "Refund request was
// raised for this transaction. But it is pending state." for a refund
// taken; TXN_FAILURE with code 617 "Refund Already Raised" to a refund
// repeated within ten minutes, or 629 "Refund is already Successful" once
// it has gone through (its refund response codes). Its status API is a
// POST of a signed body, so no result endpoint.
func paytmRefunds(code, msg string) *heldKeys {
	return &heldKeys{
		keyOf: jsonMember("body", "refId"),
		refusal: func(refID string) string {
			return fmt.Sprintf(`{"head":{"clientId":"C11","responseTimestamp":"1764960000000","signature":"c2ln","version":"v1"},`+
				`"body":{"txnTimestamp":"2026-12-05 19:00:00.0","orderId":"ORD_98765","mid":"INTEGR7769XXXXXX9383","refId":%q,`+
				`"resultInfo":{"resultStatus":"TXN_FAILURE","resultCode":%q,"resultMsg":%q},`+
				`"txnId":"20261205111212800110168470101509706","refundAmount":"120.00"}}`, refID, code, msg)
		},
	}
}

// decodePaytmRefund reads body.resultInfo as Paytm's SDKs do: TXN_SUCCESS
// settles the refund, PENDING has it in hand, TXN_FAILURE is Paytm's
// refusal.
func decodePaytmRefund(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Body struct {
			RefundID   string `json:"refundId"`
			ResultInfo struct {
				ResultStatus string `json:"resultStatus"`
				ResultCode   string `json:"resultCode"`
				ResultMsg    string `json:"resultMsg"`
			} `json:"resultInfo"`
		} `json:"body"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch info := v.Body.ResultInfo; info.ResultStatus {
	case "TXN_SUCCESS":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Body.RefundID}, nil
	case "PENDING":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.Body.RefundID}, nil
	case "TXN_FAILURE":
		return idem.Outcome{State: idem.StateFailed, Reason: info.ResultMsg + " (" + info.ResultCode + ")"}, nil
	}
	return idem.Outcome{}, fmt.Errorf("paytm: resultStatus %q", v.Body.ResultInfo.ResultStatus)
}

const paytmRefund = `{"body":{"mid":"INTEGR7769XXXXXX9383","txnType":"REFUND","orderId":"ORD_98765",` +
	`"txnId":"20261205111212800110168470101509706","refId":"REFUND_7f3c9a","refundAmount":"120.00"},` +
	`"head":{"signature":"c2ln"}}`

func paytmRefundRequest(base string) idem.Request {
	return idem.Request{Key: "REFUND_7f3c9a", URL: base + "/refund/apply", Body: []byte(paytmRefund)}
}

var paytmRefusals = []struct{ code, msg string }{{"617", "Refund Already Raised"}, {"629", "Refund is already Successful"}}

// Paytm refuses a refId it holds 200 OK, TXN_FAILURE, no error member:
// to the resend after a lost answer the decoder read it as failed, and a
// refund, the request itself of a refund API, was no subject of
// duplicateWords, nor "raised" or "successful" words saying it exists:
// Submit returned ErrFailed for a refund taken, inviting it again under a
// new refId (a second refund). Left for a person.
func TestRefundAlreadyRaisedToAResendIsNoFailure(t *testing.T) {
	for _, refusal := range paytmRefusals {
		t.Run(refusal.code, func(t *testing.T) {
			requireHeldKeyResendForAPerson(t, paytmRefunds(refusal.code, refusal.msg), decodePaytmRefund, paytmRefundRequest)
		})
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy:
// the refund is ours, flagged for a person, never failed nor resent.
func TestRefundAlreadyRaisedToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, refusal := range paytmRefusals {
		t.Run(refusal.code, func(t *testing.T) {
			requireHeldKeyFirstAttemptForAPerson(t, paytmRefunds(refusal.code, refusal.msg), decodePaytmRefund, paytmRefundRequest, refusal.msg)
		})
	}
}
