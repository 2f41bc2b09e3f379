package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// DOKU answers a request resent with its request id (SNAP's X-EXTERNAL-ID)
// with the first answer's body and 409 Conflict
// (developers.doku.com/get-started-with-doku-api/idempotency-request).
// A SNAP transfer's body names the merchant's partnerReferenceNo and
// DOKU's referenceNo, its outcome in a responseCode ("2001800"
// Successful, "2021800" Request In Progress:
// dashboard.doku.com/docs/docs/technical-references/error-response), with
// no "id" nor "status" DecodeJSON reads: the partnerReferenceNo in it
// would show it is ours, but nothing in it says what became of the
// transfer to DecodeJSON, and a Decoder is not given a 409. Such a
// replay, a transfer in progress or made, is left the key's request in
// flight: never failed, never settled, resent under the same
// X-EXTERNAL-ID and never under another.
func TestDOKUSnapConflictReplayIsNotSettled(t *testing.T) {
	for _, tt := range []struct{ name, code, message string }{
		{"successful", "2001800", "Successful"},
		{"in progress", "2021800", "Request In Progress"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, gatewayTimeout, shape{status: http.StatusConflict, body: `{"responseCode":"` + tt.code +
				`","responseMessage":"` + tt.message + `","referenceNo":"2020102977770000000009",` +
				`"partnerReferenceNo":"2020102900000000000001","amount":{"value":"12345678.00","currency":"IDR"},` +
				`"beneficiaryAccountNo":"888801000157508","sourceAccountNo":"888801000157508"}`})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-EXTERNAL-ID", idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: "41807553358950093184162180797837",
				URL: v.srv.URL + "/v1.0/transfer-interbank",
				Body: []byte(`{"partnerReferenceNo":"2020102900000000000001","amount":{"value":"12345678.00","currency":"IDR"},` +
					`"beneficiaryAccountNo":"888801000157508","beneficiaryBankCode":"002","sourceAccountNo":"888801000157508"}`)})
			requireKeyInFlight(t, res, err, "DOKU's transfer settled by a body nothing reads")
			v.requireKeys(t, "X-EXTERNAL-ID", "41807553358950093184162180797837", 5)
		})
	}
}
