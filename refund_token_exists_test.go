package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/idemkit/idem"
)

// payuRefunds is PayU India's refund API, the postservice form command
// cancel_refund_transaction (docs.payu.in, Refund Transaction API): var1
// is the payment's mihpayid, var2 the merchant's "Token ID (unique token
// from the merchant)" for this refund, var3 the amount; answered 200 OK
// with {"status":1,"msg":"Refund Request Queued","request_id":…,
// "bank_ref_num":null,"mihpayid":…,"error_code":102} (the docs' sample
// response), or "status": 0 with the refusal in msg and error_code: 106
// "Token already exists" to a token it holds, 109 "Request is already
// logged" (docs.payu.in, Error Codes for Refund Initiation). Its refund
// lookups are POSTs of the same form, so no result endpoint.
func payuRefunds(msg string, code int) *heldKeys {
	return &heldKeys{
		keyOf:   formField("var2"),
		refusal: func(string) string { return fmt.Sprintf(`{"status":0,"msg":%q,"error_code":%d}`, msg, code) },
	}
}

// decodePayURefund reads the refund's answer as PayU's docs say ("The
// error_code value 102 should be treated as a success; the rest are
// failures", Check Refund Status API) and ActiveMerchant's PayU India
// gateway does (status 1 a success, else a failure with msg): the
// refund queued settles it, anything else is PayU's refusal.
func decodePayURefund(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Status    int    `json:"status"`
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
		ErrorCode int    `json:"error_code"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	if v.Status == 1 && v.ErrorCode == 102 {
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.RequestID}, nil
	}
	return idem.Outcome{State: idem.StateFailed, Reason: v.Msg + " (" + strconv.Itoa(v.ErrorCode) + ")"}, nil
}

const payuRefundForm = "command=cancel_refund_transaction&hash=06ee55774af4&key=Gzv04m&var1=403993715512169368&var2=rfnd-7f3c9a&var3=100.00"

func payuRefundRequest(base string) idem.Request {
	return idem.Request{Key: "rfnd-7f3c9a", URL: base + "/merchant/postservice?form=2",
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(payuRefundForm)}
}

var payuRefusals = []struct {
	msg  string
	code int
}{{"Token already exists", 106}, {"Request is already logged", 109}}

// PayU refuses a refund token it holds 200 OK, "status": 0, no error
// member: to the resend after a lost answer, the decoder read it as
// failed and Submit returned ErrFailed for a refund queued, inviting it
// again under a new token (a second refund). It says the refund under
// the token exists: left for a person.
func TestRefundTokenExistsToAResendIsNoFailure(t *testing.T) {
	for _, refusal := range payuRefusals {
		t.Run(refusal.msg, func(t *testing.T) {
			requireHeldKeyResendForAPerson(t, payuRefunds(refusal.msg, refusal.code), decodePayURefund, payuRefundRequest)
		})
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy:
// the refund is ours, flagged for a person, never failed nor resent.
func TestRefundTokenExistsToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, refusal := range payuRefusals {
		t.Run(refusal.msg, func(t *testing.T) {
			requireHeldKeyFirstAttemptForAPerson(t, payuRefunds(refusal.msg, refusal.code), decodePayURefund, payuRefundRequest, refusal.msg)
		})
	}
}
