package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
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
//
// The first refund is queued; then lost says how its answer is lost: the
// connection dropped (Submit resends), or a 503 from the client's own
// sidecar, which sends its copy (retryingSidecar).
type payuRefunds struct {
	unavailable bool   // the first refund's answer: a 503 rather than a dropped connection
	refusal     string // the answer's msg to a token it holds
	code        int    // its error_code

	mu      sync.Mutex
	tokens  []string // the var2 of each refund queued
	refunds []string // each refund request's body
}

func (p *payuRefunds) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(b))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunds = append(p.refunds, string(b))
	w.Header().Set("Content-Type", "application/json")
	if slices.Contains(p.tokens, form.Get("var2")) {
		_, _ = fmt.Fprintf(w, `{"status":0,"msg":%q,"error_code":%d}`, p.refusal, p.code)
		return
	}
	p.tokens = append(p.tokens, form.Get("var2"))
	if p.unavailable {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
		return
	}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
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
// the token exists: left for a person (ReviewRefusedAfterSend), one
// refund, every request the same bytes.
func TestRefundTokenExistsToAResendIsNoFailure(t *testing.T) {
	for _, refusal := range payuRefusals {
		t.Run(refusal.msg, func(t *testing.T) {
			p := &payuRefunds{refusal: refusal.msg, code: refusal.code}
			srv := httptest.NewServer(http.HandlerFunc(p.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodePayURefund))
			req := payuRefundRequest(srv.URL)

			res, err := c.Submit(t.Context(), req)
			requireRefusedAfterSend(t, c, res, err, req.Key, "refund queued under the token")

			p.mu.Lock()
			defer p.mu.Unlock()
			require.Equal(t, []string{req.Key}, p.tokens, "refunds queued")
			require.Equal(t, slices.Repeat([]string{payuRefundForm}, 4), p.refunds, "refund requests")
		})
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy
// (Istio retries a 503 reset before headers): the refund is ours,
// flagged for a person (ReviewKeyInUse), never failed nor resent.
func TestRefundTokenExistsToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, refusal := range payuRefusals {
		t.Run(refusal.msg, func(t *testing.T) {
			p := &payuRefunds{unavailable: true, refusal: refusal.msg, code: refusal.code}
			sidecar := retryingSidecar(t, p.serve)
			c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodePayURefund))

			requireLeftForAPerson(t, c, payuRefundRequest(sidecar.URL), refusal.msg)

			p.mu.Lock()
			defer p.mu.Unlock()
			require.Len(t, p.tokens, 1, "refunds queued")
			require.Equal(t, []string{payuRefundForm, payuRefundForm}, p.refunds, "copies: ours and the sidecar's, nothing resent")
		})
	}
}
