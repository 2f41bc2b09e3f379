package idem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// midtransStatusOf is Midtrans's Get Transaction Status answer, GET
// /v2/{order_id}/status, for the transaction an order_id names, the
// shape docs.midtrans.com/reference-link/get-transaction-status gives:
// {"status_code": "200", "transaction_id": …, "order_id": …,
// "transaction_status": "capture", "gross_amount": "30000.00", …}. The
// charge sends its amount in an envelope, "transaction_details":
// {"order_id": "A87551", "gross_amount": 145000} ("Total transaction
// amount in IDR. Note: Do not add decimal.",
// docs.midtrans.com/reference/json-object); the status answers it at
// its top level, written with two decimals.
func midtransStatusOf(orderID, grossAmount string) string {
	return `{"status_code":"200","status_message":"Success, Credit Card transaction is successful",` +
		`"transaction_id":"249fc620-6017-4540-af7c-5a1c25788f46","masked_card":"48111111-1114","order_id":"` + orderID + `",` +
		`"payment_type":"credit_card","transaction_time":"2026-12-07 09:39:33","transaction_status":"capture","fraud_status":"accept",` +
		`"approval_code":"1424936374393","bank":"bni","gross_amount":"` + grossAmount + `","currency":"IDR","card_type":"credit"}`
}

// The charge's connection drops, and the status query by its order_id
// finds a transaction: another order's 99000 IDR capture when the
// order_id was an earlier checkout's (Midtrans's own words for one
// reused: "order_id has been paid and utilized, please use another order
// ID", docs.midtrans.com/docs/error-code-and-response-code), or our
// 145000. idem compared the request's transaction_details.gross_amount
// at that path only, which the status answer has not, so nothing was
// compared and the other order's capture settled ours succeeded: our
// 145000 never charged, the goods shipped. Read from the envelope,
// answered at the top, it is left for a person (ReviewKeyInUse), never
// resent; our own capture is settled.
func TestMidtransStatusOfAnotherOrdersCapture(t *testing.T) {
	answer := func(amount string) string { return midtransStatusOf("order-7", amount) }
	requireQueriedResults(t, answer, "99000.00", "145000.00", func(srv *httptest.Server, clock *idemtest.Clock) (*idem.Client, idem.Request) {
		c := clientFor(t, srv, clock, idem.WithDecoder(decodeMidtrans), idem.WithKeyInBody(), idem.WithResultEndpoint("/v2/{key}/status"))
		return c, idem.Request{Key: "order-7", URL: srv.URL + "/v2/charge",
			Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(midtransCharge)}
	}, "249fc620-6017-4540-af7c-5a1c25788f46", `gross_amount "99000.00"`)
}
