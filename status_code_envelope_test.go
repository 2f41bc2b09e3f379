package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// midtransCharges models Midtrans's Core API charge (POST /v2/charge),
// which de-duplicates by the merchant's transaction_details.order_id and
// carries its own status in a "status_code" member of a 200 reply: "406
// Duplicate order ID. order_id has already been utilized previously"
// (docs.midtrans.com/reference/code-4xx); a GoPay "Duplicate
// transaction" or "Transaction in progress" comes HTTP 200 with
// {"status_code":"406","status_message":"The request could not be
// completed due to a conflict with the current state of the target
// resource, please try again","id":…} (docs.midtrans.com, the GoPay
// error mapping of its changelog); its error page words a reused one
// "order_id has been paid and utilized, please use another order ID"
// (docs.midtrans.com/docs/error-code-and-response-code). A gateway in
// front answers the first charge 504 after Midtrans captured it when
// lostFirst is set.
type midtransCharges struct {
	refusal   string // status_message of the 406 to an order_id held
	lostFirst bool

	mu       sync.Mutex
	held     map[string]bool
	captures int
	charges  []string
}

func (m *midtransCharges) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct {
		TransactionDetails struct {
			OrderID string `json:"order_id"`
		} `json:"transaction_details"`
	}
	if json.Unmarshal(b, &req) != nil || req.TransactionDetails.OrderID == "" {
		http.Error(w, "no order_id", http.StatusBadRequest)
		return
	}
	id := req.TransactionDetails.OrderID
	m.mu.Lock()
	defer m.mu.Unlock()
	m.charges = append(m.charges, string(b))
	w.Header().Set("Content-Type", "application/json")
	if m.held[id] {
		_, _ = io.WriteString(w, `{"status_code":"406","status_message":`+strconv.Quote(m.refusal)+`,"id":"be929ec4-19cb-458b-85e4-43869ada0597"}`)
		return
	}
	m.held[id] = true
	m.captures++
	if len(m.charges) == 1 && m.lostFirst {
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = io.WriteString(w, `<html><body><h1>504 Gateway Time-out</h1></body></html>`)
		return
	}
	_, _ = io.WriteString(w, `{"status_code":"200","status_message":"Success, Credit Card transaction is successful",`+
		`"transaction_id":"7b0cd1b4-e2a6-4a32-a4b6-6aa0e8e2f1b8","order_id":`+strconv.Quote(id)+`,`+
		`"gross_amount":"145000.00","payment_type":"credit_card","transaction_status":"capture","fraud_status":"accept"}`)
}

// decodeMidtrans reads a charge's answer as midtrans-go does: a body
// "status_code" of 401 and up, but 407 (expired), is the API's error,
// which the caller takes for the charge's failure; 202 is a denied
// charge; 200 and 201 hold the transaction.
func decodeMidtrans(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		StatusCode    string `json:"status_code"`
		StatusMessage string `json:"status_message"`
		TransactionID string `json:"transaction_id"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	code, err := strconv.Atoi(v.StatusCode)
	switch {
	case err != nil:
		return idem.Outcome{}, err
	case code >= 401 && code != 407, code == 202:
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.TransactionID, Reason: v.StatusCode + " " + v.StatusMessage}, nil
	case code == 200 || code == 201:
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.TransactionID}, nil
	}
	return idem.Outcome{}, nil // not settled: asked again
}

const midtransCharge = `{"payment_type":"credit_card","transaction_details":{"order_id":"order-7","gross_amount":145000},` +
	`"credit_card":{"token_id":"481111-1114-a901971f-2f1b-4781-802a-df326fbf0e9c"}}`

func (m *midtransCharges) submit(t *testing.T, opts ...idem.Option) (*idem.Client, *idem.Result, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	if opts == nil {
		opts = []idem.Option{idem.WithDecoder(decodeMidtrans)}
	}
	c := clientFor(t, srv, idemtest.NewClock(epoch), append(opts, idem.WithKeyInBody())...)
	res, err := c.Submit(t.Context(), idem.Request{Key: "order-7", URL: srv.URL + "/v2/charge",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(midtransCharge)})
	return c, res, err
}

// Midtrans's 406 in a 200 body, to the resend after a gateway's 504 that
// followed the capture, was read as the charge's failure when its words
// did not say "duplicate": idem read an envelope's error only in a
// "code", "retCode" or "status" member, so the refusal was the decoder's
// failure and the call ended ErrFailed for a captured charge, inviting
// it again under a new order_id. A "status_code" that is an HTTP error's
// number is such an envelope's error: the resends' refusals leave the
// charge for a person, never failed. One capture, every charge the same
// bytes.
func TestStatusCodeEnvelopeRefusalToAResendIsNoFailure(t *testing.T) {
	for _, refusal := range []string{
		"The request could not be completed due to a conflict with the current state of the target resource, please try again",
		"order_id has been paid and utilized, please use another order ID",
		"Duplicate order ID. order_id has already been utilized previously",
	} {
		t.Run(refusal, func(t *testing.T) {
			m := &midtransCharges{refusal: refusal, lostFirst: true, held: map[string]bool{}}
			c, res, err := m.submit(t)
			requireRefusedAfterSend(t, c, res, err, "order-7", "captured charge")
			m.mu.Lock()
			defer m.mu.Unlock()
			require.Equal(t, 1, m.captures, "captures")
			require.Equal(t, slices.Repeat([]string{midtransCharge}, 4), m.charges, "charges")
		})
	}

	// To a first attempt, the order_id Midtrans holds is an earlier
	// charge's or a copy of ours (a mesh's retry of the first attempt
	// whose answer it lost): "paid and utilized" is its "Duplicate order
	// ID" in other words (an order_id "currently active or has been paid
	// previously", docs.midtrans.com/docs/error-code-and-response-code),
	// and both, as PayU's "Token already exists" and Toss's
	// ALREADY_PROCESSED_PAYMENT to a first attempt, are left for a
	// person. It was ErrFailed, and a caller told "failed" pays again.
	for _, refusal := range []string{
		"order_id has been paid and utilized, please use another order ID",
		"Duplicate order ID. order_id has already been utilized previously",
	} {
		t.Run("to a first attempt: "+refusal, func(t *testing.T) {
			m := &midtransCharges{refusal: refusal, held: map[string]bool{"order-7": true}}
			_, res, err := m.submit(t)
			requireForeignKey(t, res, err)
			m.mu.Lock()
			defer m.mu.Unlock()
			require.Equal(t, 0, m.captures, "captures")
			require.Len(t, m.charges, 1, "charges")
		})
	}

	// DecodeJSON read the refusal's {"status_code":"406",…,"id":…} as a
	// resource made, the error's id its own: a charge never made was
	// succeeded, and the shop ships what nobody paid for.
	t.Run("the default decoder: a refusal is no charge made", func(t *testing.T) {
		m := &midtransCharges{refusal: "The request could not be completed due to a conflict with the current state of the target resource, please try again",
			held: map[string]bool{"order-7": true}}
		_, res, err := m.submit(t, idem.WithDecoder(idem.DecodeJSON))
		requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrUnknownOutcome}, "", "")
		m.mu.Lock()
		defer m.mu.Unlock()
		require.Equal(t, 0, m.captures, "captures")
		require.Equal(t, slices.Repeat([]string{midtransCharge}, 5), m.charges, "charges")
	})

	t.Run("a charge captured at once is settled", func(t *testing.T) {
		m := &midtransCharges{held: map[string]bool{}}
		_, res, err := m.submit(t)
		requireOutcome(t, res, err, idem.StateSucceeded, nil, "7b0cd1b4-e2a6-4a32-a4b6-6aa0e8e2f1b8", "")
		m.mu.Lock()
		defer m.mu.Unlock()
		require.Equal(t, 1, m.captures, "captures")
		require.Len(t, m.charges, 1, "charges")
	})
}
