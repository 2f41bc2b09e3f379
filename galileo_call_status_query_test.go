package idem_test

import (
	"net/http"
	"testing"
)

// Galileo's Get Call Status (https://docs.galileo-ft.com/pro/reference/post_getcallstatus)
// answers the status of an earlier call by its transactionId and the
// endpoint's name (requestMethodName), in Galileo's envelope
// (reference/response; reference/errors: "errors" present with an
// error's code). It is a POST: a GET of the caller's own in front of it
// is the result endpoint, passing its answer through. 583-01 "The
// request method name does not exist" refuses the lookup itself, a
// wrong requestMethodName: it says nothing of the call, and was read as
// the call not found, so that, with the transactionId in the body, the
// request was sent again once the result lag had passed (Galileo answers
// a repeated successful transactionId status_code 24, which a person
// then looks at, but a lookup that fails must tell nothing). It is asked
// again, never followed by a resend. (The order and its lookup are the
// Binance model's; only the answer is Galileo's.)
func TestQueryGalileoCallStatusMethodNameIsNoNotFound(t *testing.T) {
	requireQueryAnswerNeverResent(t, shape{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}},
		body: `{"status_code":"583-01","status":"The request method name does not exist","system_timestamp":"2026-12-01 10:20:46",` +
			`"response_data":{},"processing_time":0.028,"echo":{"transaction_id":"q-1","provider_transaction_id":"","provider_timestamp":null},` +
			`"errors":["The request method name does not exist"]}`})
}
