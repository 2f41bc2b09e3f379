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

// heldRefunds is a refund API that answers every refund 200 OK and
// refuses in that answer (refusal) a refund key it holds (keyOf). The
// first refund is taken; then its answer is lost: the connection dropped
// (Submit resends), or, unavailable, a 503 from the client's own sidecar,
// which sends its copy (retryingSidecar).
type heldRefunds struct {
	unavailable bool
	keyOf       func(body []byte) string
	refusal     func(key string) string
	status      int // the refusal's, 200 when 0

	mu       sync.Mutex
	keys     []string // the key of each refund taken
	requests []string // each refund request's body
}

func (p *heldRefunds) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	key := p.keyOf(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, string(b))
	w.Header().Set("Content-Type", "application/json")
	if slices.Contains(p.keys, key) {
		if p.status != 0 {
			w.WriteHeader(p.status)
		}
		_, _ = io.WriteString(w, p.refusal(key))
		return
	}
	p.keys = append(p.keys, key)
	if p.unavailable {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
		return
	}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// requireHeldRefundResendForAPerson: the refusal of a key it holds, to
// the resend after a lost answer, leaves the refund taken for a person
// (ReviewRefusedAfterSend), one refund, every request the same bytes.
func requireHeldRefundResendForAPerson(t *testing.T, p *heldRefunds, decode idem.Decoder, request func(base string) idem.Request) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decode))
	req := request(srv.URL)

	res, err := c.Submit(t.Context(), req)
	requireRefusedAfterSend(t, c, res, err, req.Key, "refund taken under the key")

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, []string{req.Key}, p.keys, "refunds taken")
	require.Equal(t, slices.Repeat([]string{string(req.Body)}, 4), p.requests, "refund requests")
}

// requireHeldRefundFirstAttemptForAPerson: the same refusal to idem's
// first attempt answers its sidecar's copy (Istio retries a 503 reset
// before headers): the refund is ours, flagged for a person
// (ReviewKeyInUse), never failed nor resent.
func requireHeldRefundFirstAttemptForAPerson(t *testing.T, p *heldRefunds, decode idem.Decoder, request func(base string) idem.Request, words string) {
	t.Helper()
	p.unavailable = true
	sidecar := retryingSidecar(t, p.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decode))
	req := request(sidecar.URL)

	requireLeftForAPerson(t, c, req, words)

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, []string{req.Key}, p.keys, "refunds taken")
	require.Equal(t, []string{string(req.Body), string(req.Body)}, p.requests, "copies: ours and the sidecar's, nothing resent")
}

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
func payuRefunds(msg string, code int) *heldRefunds {
	return &heldRefunds{
		keyOf: func(body []byte) string {
			form, _ := url.ParseQuery(string(body))
			return form.Get("var2")
		},
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
			requireHeldRefundResendForAPerson(t, payuRefunds(refusal.msg, refusal.code), decodePayURefund, payuRefundRequest)
		})
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy:
// the refund is ours, flagged for a person, never failed nor resent.
func TestRefundTokenExistsToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, refusal := range payuRefusals {
		t.Run(refusal.msg, func(t *testing.T) {
			requireHeldRefundFirstAttemptForAPerson(t, payuRefunds(refusal.msg, refusal.code), decodePayURefund, payuRefundRequest, refusal.msg)
		})
	}
}
