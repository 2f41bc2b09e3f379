package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// dLocal's payments carry, beside their status, a "status_code" of the
// status's own numbering (docs.dlocal.com/reference/payment-status-codes:
// PENDING 100, PAID 200, REJECTED 300 to 3xx, CANCELLED 400, AUTHORIZED
// 600, VERIFIED 700; a cancelled enrollment's 401 in
// docs.dlocal.com/reference/cancel-an-enrollment), and the create answers
// with the payment (docs.dlocal.com/api-documentation/payins-api-reference/payments,
// 200 OK, "status":"PAID","status_code":"200"); the key goes in
// X-Idempotency-Key. A CANCELLED payment's "400" is no HTTP error in an
// envelope (Midtrans's {"status_code":"406",…}, which has no "status"):
// read as one, the answer proved nothing, the payment was sent again
// until the call's budget ran out and was left unknown, every resend
// answered the same, where a cancelled payment reads as created, as
// DecodeJSON reads "canceled".
func TestDLocalPaymentStatusCodes(t *testing.T) {
	const payment = `{"id":"D-4-be8a9bb2","amount":120.00,"currency":"USD","country":"BR",` +
		`"payment_method_id":"CARD","payment_method_flow":"DIRECT","order_id":"657434343",` +
		`"created_date":"2018-02-15T15:14:52-00:00",`
	lost := shape{status: http.StatusGatewayTimeout, body: `<html>gateway timeout</html>`}
	dlocal := []idem.Option{idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare)}
	for _, tt := range []struct {
		name   string
		shapes []shape
		state  idem.State
		posts  int
	}{
		{"paid", []shape{{status: http.StatusOK, body: payment +
			`"status":"PAID","status_code":"200","status_detail":"The payment was paid."}`}}, idem.StateSucceeded, 1},
		{"paid, replayed after a lost answer", []shape{lost, {status: http.StatusOK, body: payment +
			`"status":"PAID","status_code":"200","status_detail":"The payment was paid."}`}}, idem.StateSucceeded, 2},
		{"cancelled", []shape{{status: http.StatusOK, body: payment +
			`"status":"CANCELLED","status_code":"400","status_detail":"The payment was cancelled."}`}}, idem.StateSucceeded, 1},
		{"cancelled, replayed after a lost answer", []shape{lost, {status: http.StatusOK, body: payment +
			`"status":"CANCELLED","status_code":"401","status_detail":"The payment was cancelled."}`}}, idem.StateSucceeded, 2},
		{"rejected", []shape{{status: http.StatusOK, body: payment +
			`"status":"REJECTED","status_code":"309","status_detail":"Card expired."}`}}, idem.StateFailed, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			res, err := v.submit(t, dlocal...)
			require.Equal(t, tt.state, res.State, "err: %v", err)
			if tt.state == idem.StateSucceeded {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, idem.ErrFailed)
			}
			require.Equal(t, "D-4-be8a9bb2", res.ResourceID)
			v.requireKeys(t, "X-Idempotency-Key", "k", tt.posts)
		})
	}
}

// dLocal refuses an order_id it holds with 400 {"code":5009,"message":
// "Order ID is duplicated."} (docs.dlocal.com/reference/http-errors-payments).
// A service that makes its order_id the key (WithKeyInBody) and gets it
// to a first attempt may have had a copy of that attempt go first (a
// mesh's retry of a reset): flagged for a person, never ErrFailed, which
// would invite the payment under a new order_id, and never resent.
func TestDLocalDuplicatedOrderIDToAFirstAttempt(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusBadRequest, body: `{"code":5009,"message":"Order ID is duplicated."}`})
	c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
	body := `{"amount":120.00,"currency":"USD","country":"BR","payment_method_id":"CARD",` +
		`"payment_method_flow":"DIRECT","order_id":"ord-657434343"}`
	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-657434343", URL: v.srv.URL + "/payments", Body: []byte(body)})
	requireForeignKey(t, res, err)
	v.requireBodies(t, body, 1)
}

// A "status_code" that is an HTTP error's number beside a refusal's
// status word may be the call's own error, not the status's number: it
// proves nothing, as before, and is not taken for the payment's failure.
func TestStatusCodeErrorBesideARefusalProvesNothing(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusOK, body: `{"id":"D-4-be8a9bb2","status":"FAILED","status_code":"500"}`})
	res, err := v.submit(t)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotEqual(t, idem.StateFailed, res.State)
}

// dLocal rejects a payment that repeats one it holds with REJECTED and
// status_code 307, "Duplicated payment."
// (docs.dlocal.com/reference/payment-status-codes). Read as the
// payment's failure, ErrFailed would invite it again under a new key,
// though the payment it repeats may be ours: to a first attempt it is
// flagged as the key's other request (ReviewKeyInUse), after a lost
// answer it is weighed as a refusal of a request that may have executed
// (ReviewRefusedAfterSend), the same key on every send, never ErrFailed.
func TestDLocalDuplicatedPaymentIsNeverAFailure(t *testing.T) {
	dup := shape{status: http.StatusOK, body: `{"id":"D-4-cf2d3a11","amount":120.00,"currency":"USD","country":"BR",` +
		`"order_id":"657434343","status":"REJECTED","status_code":"307","status_detail":"Duplicated payment."}`}
	lost := shape{status: http.StatusGatewayTimeout, body: `<html>gateway timeout</html>`}
	for _, tt := range []struct {
		name   string
		shapes []shape
		review string
		posts  int
	}{
		{"to a first attempt", []shape{dup}, idem.ReviewKeyInUse, 1},
		{"after a lost answer", []shape{lost, dup}, idem.ReviewRefusedAfterSend, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			res, err := v.submit(t, idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Equal(t, tt.review, res.Review)
			v.requireKeys(t, "X-Idempotency-Key", "k", tt.posts)
		})
	}
}
