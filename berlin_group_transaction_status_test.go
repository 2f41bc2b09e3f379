package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A Berlin Group NextGenPSD2 bank answers a payment initiation 201 with
// the payment's "paymentId" and its "transactionStatus", an ISO 20022
// code: RCVD when received, PDNG, ACTC, ACCP or ACSP on its way, ACSC
// or ACCC once settled, RJCT when rejected, CANC when cancelled before
// execution ({"transactionStatus":"RCVD","paymentId":"1234-wertiq-983",
// "_links":{"scaRedirect":…}}; Klarna's XS2A v2, docs.klarna.com/open-banking/v2-payments-pis/;
// the codes as Barclays' PSD2 API and Mambu's describe them,
// docs.mambu.com/api/payments-mpg/schemas/collectionresponse/). With
// neither "state" nor "id" the answer proved nothing: every initiated
// payment was sent again under its X-Request-ID until the key window
// passed, then left unknown. It is read as a payment made, once; RJCT
// as failed.
func TestBerlinGroupPaymentInitiation(t *testing.T) {
	for _, tt := range []struct {
		status string
		state  idem.State
	}{
		{"RCVD", idem.StateSucceeded},
		{"PDNG", idem.StateSucceeded},
		{"ACTC", idem.StateSucceeded},
		{"ACCP", idem.StateSucceeded},
		{"ACSP", idem.StateSucceeded},
		{"ACSC", idem.StateSucceeded},
		{"ACCC", idem.StateSucceeded},
		{"CANC", idem.StateSucceeded}, // cancelled before execution, as a "canceled" resource: made, then ended
		{"RJCT", idem.StateFailed},
	} {
		t.Run(tt.status, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusCreated,
				body: `{"transactionStatus":"` + tt.status + `","paymentId":"1234-wertiq-983",` +
					`"_links":{"scaRedirect":{"href":"https://www.testbank.com/asdfasdfasdf"},` +
					`"self":{"href":"/v1/payments/sepa-credit-transfers/1234-wertiq-983"},` +
					`"status":{"href":"/v1/payments/sepa-credit-transfers/1234-wertiq-983/status"}}}`})
			res, err := v.submit(t, idem.WithKeyHeader("X-Request-ID", idem.KeyBare))
			want := idem.Outcome{State: tt.state, ResourceID: "1234-wertiq-983"}
			if tt.state == idem.StateFailed {
				want.Reason = tt.status
			}
			requireSettledOnce(t, v, "X-Request-ID", res, err, want)
		})
	}
}

// A "transactionStatus" is read only as ISO 20022's codes beside a
// "paymentId": another word there is no Berlin Group status, and the
// status endpoint's answer, which names no payment, proves nothing of
// which one was made.
func TestTransactionStatusNotRead(t *testing.T) {
	for _, tt := range []struct {
		name, body string
	}{
		{"status answer without paymentId", `{"transactionStatus":"ACSC"}`},
		{"word of another API", `{"transactionStatus":"ACCEPTED","paymentId":"p_1"}`},
		{"empty", `{"transactionStatus":"","paymentId":"p_1"}`},
		{"not a string", `{"transactionStatus":1,"paymentId":"p_1"}`},
		{"status beside it", `{"transactionStatus":"RCVD","paymentId":"p_1","status":"ERROR"}`},
		{"tpp error", `{"transactionStatus":"RCVD","paymentId":"p_1","error":{"code":"FORMAT_ERROR"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: http.StatusCreated, Body: []byte(tt.body)})
			require.Errorf(t, err, "read as %+v", out)
		})
	}
}
