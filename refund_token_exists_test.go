package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

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
// refund done (100) or queued (102) settles it. The codes of a refund
// taken but not finished (docs.payu.in/reference-link/
// error-codes-for-refund-initiation: 101 PENDING, 112 RISK_QUEUED, 122
// APPROVAL PENDING, 123 "Request set as pending - requires manual
// follow-up", 126 IN_PROGRESS, 127 REQUESTED, 225 and 226 PENDING) leave
// it processing: read as failed, a caller refunds again. Anything else
// is PayU's refusal.
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
	switch v.ErrorCode {
	case 100, 102:
		if v.Status == 1 {
			return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.RequestID}, nil
		}
	case 101, 112, 122, 123, 126, 127, 225, 226:
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.RequestID}, nil
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

// PayU answers a refund it has taken but not finished with an
// error_code of its own, not 102 (docs.payu.in/reference-link/
// error-codes-for-refund-initiation): 101 PENDING, 126 IN_PROGRESS, and
// 123 "Request set as pending - requires manual follow-up", which the
// table files under FAILURE though its words say the request is held.
// decodePayURefund read each as failed, and a caller told "failed"
// refunds again under a new token: two refunds. They are processing,
// never failed: idem asks again under the same token, which PayU
// refuses as one it holds (106 "Token already exists"), leaving the
// refund, taken once, for a person.
func TestPayURefundPendingIsNoFailure(t *testing.T) {
	for code, pending := range map[string]string{
		"101": `{"status":1,"msg":"Refund Successful","request_id":"131528953","bank_ref_num":null,"mihpayid":403993715512169368,"error_code":101}`,
		"126": `{"status":1,"msg":"IN_PROGRESS","request_id":"131528953","bank_ref_num":null,"mihpayid":403993715512169368,"error_code":126}`,
		"123": `{"status":0,"msg":"Request set as pending - requires manual follow-up","error_code":123}`,
	} {
		t.Run(code, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				bodies = append(bodies, string(b))
				w.Header().Set("Content-Type", "application/json")
				if len(bodies) > 1 {
					_, _ = io.WriteString(w, `{"status":0,"msg":"Token already exists","error_code":106}`)
					return
				}
				_, _ = io.WriteString(w, pending)
			}))
			t.Cleanup(srv.Close)
			res, err := heldKeyClient(t, srv, decodePayURefund).Submit(t.Context(), payuRefundRequest(srv.URL))
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, idem.StateProcessing, res.State)
			require.Equal(t, idem.ReviewRefusedAfterSend, res.Review, "the refusal of the token held, for a person")
			mu.Lock()
			defer mu.Unlock()
			require.Greater(t, len(bodies), 1, "asked again under the token")
			for i, b := range bodies {
				require.Equal(t, payuRefundForm, b, "request %d: the same token, the same bytes", i)
			}
		})
	}
}
