package idem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// worldlineCancelAnswer is Worldline Direct's answer to POST
// /v2/{merchantId}/payments/{paymentId}/cancel, the payment cancelled
// alone under "payment" (the SDKs' CancelPaymentResponse: "payment",
// a PaymentResponse), its paymentOutput.amountOfMoney the payment's
// whole amount (modelled: the SDKs' PaymentOutput says only "Object
// containing amount and ISO currency code attributes"), not the amount
// the request cancelled of it.
func worldlineCancelAnswer(id string, amount int64, currency string) string {
	return fmt.Sprintf(`{"payment":{"id":%q,"paymentOutput":{"amountOfMoney":{"amount":%d,"currencyCode":%q},`+
		`"references":{"merchantReference":"order-1001"},"paymentMethod":"card"},`+
		`"status":"CANCELLED","statusOutput":{"isCancellable":false,"statusCategory":"UNSUCCESSFUL","statusCode":6,"isAuthorized":false,"isRefundable":false}}}`,
		id, amount, currency)
}

// decodeWorldlineCancel reads a CancelPayment answer: the payment
// cancelled.
func decodeWorldlineCancel(a *idem.Answer) (idem.Outcome, error) {
	id, status, err := worldlinePaymentOf(a.Body)
	if err != nil || status != "CANCELLED" {
		return idem.Outcome{}, fmt.Errorf("not a Worldline cancel")
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, nil
}

// Worldline Direct's CancelPayment takes the part of an authorised
// payment to cancel, {"amountOfMoney": {"amount", "currencyCode"}} (the
// SDKs' CancelPaymentRequest: "Object containing amount and ISO currency
// code attributes"), and answers with the payment it acted on,
// {"payment": {"id", "paymentOutput": {"amountOfMoney"}}}, its amount the
// payment's. Read as the resource the request made, the payment's 1000
// EUR against the request's 300 made our own partial cancel, replayed
// after its answer was lost ("the same outcome as the original request",
// docs.direct.worldline-solutions.com, Idempotent requests), another
// request's: ReviewKeyInUse for a person. The payment an operation acts
// on (its id in the request's path) describes no request.
func TestWorldlineReplayedPartialCancelIsOurs(t *testing.T) {
	body := `{"amountOfMoney":{"amount":300,"currencyCode":"EUR"},"isFinal":false}`
	f := &keyReplayingServer{keyHeader: "X-GCS-Idempotence-Key", status: http.StatusOK,
		marker:   http.Header{"X-Gcs-Idempotence-Request-Timestamp": {"1700000000000"}},
		cutAfter: 1, stored: map[string]string{},
		make: func([]byte, int) string { return worldlineCancelAnswer("3066019730_0", 1000, "EUR") }}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch),
		idem.WithKeyHeader("X-GCS-Idempotence-Key", idem.KeyBare), idem.WithDecoder(decodeWorldlineCancel))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v2/1234/payments/3066019730_0/cancel", Body: []byte(body)})
	requireOwnReplaySettled(t, res, err, "3066019730_0")
	f.requireSent(t, body, 2, []string{"k"})
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Empty(t, op.Review)
}
