package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// capturedRefusals are capture APIs' refusals of a capture the payment
// has had already: what a server that did not de-duplicate the key (or
// whose store lost it) answers a resend of a capture whose first
// attempt did the work and whose answer was lost.
var capturedRefusals = []struct {
	name string
	shape
}{
	// Stripe's 400 invalid_request_error, code charge_already_captured;
	// the message as stripe/stripe-java#189 quotes it.
	{"stripe", shape{status: http.StatusBadRequest, body: `{"error":{"code":"charge_already_captured",` +
		`"message":"Charge ch_16L0j8A1uVHZiLuVb8Say0YW has already been captured.","type":"invalid_request_error"}}`}},
	// PayPal's 422 issue AUTHORIZATION_ALREADY_CAPTURED, "Authorization has
	// already been captured."
	// (https://developer.paypal.com/api/payments/v2/errors/authorization_already_captured),
	// in its UNPROCESSABLE_ENTITY envelope.
	{"paypal", shape{status: http.StatusUnprocessableEntity, body: `{"name":"UNPROCESSABLE_ENTITY","details":[{"issue":"AUTHORIZATION_ALREADY_CAPTURED",` +
		`"description":"Authorization has already been captured."}],"message":"The requested action could not be performed, semantically incorrect, or failed business validation.",` +
		`"debug_id":"90957fca61718"}`}},
	// Razorpay's 400 to POST /v1/payments/{id}/capture, as its own MCP
	// server's tests model it (razorpay/razorpay-mcp-server,
	// pkg/razorpay/payments_test.go, "payment already captured").
	{"razorpay", shape{status: http.StatusBadRequest, body: `{"error":{"code":"BAD_REQUEST_ERROR","description":"This payment has already been captured"}}`}},
	// The words of the last session's report; modelled, no page quotes
	// them for a named provider.
	{"modelled", shape{status: http.StatusBadRequest, body: `{"message":"Cannot capture: capture already processed"}`}},
}

// captureAt captures through a client with the default settings, the
// key "cap-ord-9" in Idempotency-Key, resultURL the request's ResultURL
// if not empty.
func captureAt(t *testing.T, srv *httptest.Server, resultURL string) (*idem.Client, *idem.Result, error) {
	t.Helper()
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "cap-ord-9", URL: srv.URL + "/v2/payments/authorizations/0VF52814937998046/capture",
		ResultURL: resultURL, Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"amount":{"value":"10.99","currency_code":"USD"},"final_capture":true}`)})
	return c, res, err
}

// TestCaptureRefusedAsCapturedAfterALostAnswer: the refusal to a resend
// says the capture may well be our first attempt's: never failed (a
// caller told "capture failed" captures again, or fails the order whose
// money moved); asked about, and left for a person once it persists.
// No change: refusedAfterMaybeSent reads every 4xx to a resend so.
func TestCaptureRefusedAsCapturedAfterALostAnswer(t *testing.T) {
	for _, tt := range capturedRefusals {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadGateway, body: `<html>502 Bad Gateway</html>`}, tt.shape)
			c, res, err := captureAt(t, v.srv, "")
			requireRefusedAfterSend(t, c, res, err, "cap-ord-9", "capture that may have been made")
			v.requireKeys(t, "Idempotency-Key", "cap-ord-9", 4)
		})
	}
}

// TestCaptureRefusedAsCapturedToAFirstAttempt: to a first attempt the
// same words are a refusal (the payment was captured by some other
// request; nothing of this one ran): failed, with the server's words,
// and never sent again. No change.
func TestCaptureRefusedAsCapturedToAFirstAttempt(t *testing.T) {
	for _, tt := range capturedRefusals {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shape)
			_, res, err := captureAt(t, v.srv, "")
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State)
			require.Empty(t, res.Review)
			v.requireKeys(t, "Idempotency-Key", "cap-ord-9", 1)
		})
	}
}

// TestCaptureRefusedAsCapturedSettledByTheResultEndpoint: with a result
// endpoint (PayPal's GET /v2/payments/authorizations/{id}, whose status
// CAPTURED says the capture was made), the refusal is asked about and
// the answer settles it: succeeded, one capture's worth of sends. The
// endpoint lags (a replica that has not seen the authorization yet
// answers PayPal's 404 RESOURCE_NOT_FOUND) until the resend has been
// refused. No change.
func TestCaptureRefusedAsCapturedSettledByTheResultEndpoint(t *testing.T) {
	refusal := capturedRefusals[1].shape
	var mu sync.Mutex
	var posts int
	var seq []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		seq = append(seq, r.Method)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			if posts < 2 {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"name":"RESOURCE_NOT_FOUND","message":"The specified resource does not exist.","debug_id":"b3f0a1c2d4e5f"}`)
				return
			}
			_, _ = io.WriteString(w, `{"id":"0VF52814937998046","status":"CAPTURED","amount":{"value":"10.99","currency_code":"USD"}}`)
			return
		}
		if posts++; posts == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(refusal.status)
		_, _ = io.WriteString(w, refusal.body)
	}))
	t.Cleanup(srv.Close)
	_, res, err := captureAt(t, srv, srv.URL+"/v2/payments/authorizations/0VF52814937998046")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "0VF52814937998046", res.ResourceID)
	require.Empty(t, res.Review)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"POST", "GET", "POST", "GET"}, seq, "the capture, asked about, resent once, asked about")
}
