package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// TestDecodeDTOneTransactionStatus reads DT One's Digital Value Services
// transactions (dvs-api-doc.dtone.com; the shape of
// github.com/dtone/dtone-dvs-api-java-client's dto/Transaction.java and
// dto/Status.java): a numeric "id", the caller's "external_id", and a
// "status" object, a five-digit code with its word and its class's,
// {"id":90000,"message":"DECLINED","class":{"id":9,"message":"DECLINED"}}.
// The sandbox's DECLINED-* statuses (a top-up its operator refused) are
// in class DECLINED: read as no status, such a top-up was settled as
// delivered.
func TestDecodeDTOneTransactionStatus(t *testing.T) {
	tx := func(code, msg string, class, classMsg string) string {
		return `{"id":2237071538,"external_id":"k-ext","creation_date":"2026-12-06T03:40:00Z",` +
			`"status":{"id":` + code + `,"message":"` + msg + `","class":{"id":` + class + `,"message":"` + classMsg + `"}},` +
			`"product":{"id":5},"credit_party_identifier":{"mobile_number":"+6595123102"}}`
	}
	for _, c := range []struct {
		name  string
		code  int
		body  string
		state idem.State
	}{
		{"declined", 201, tx("90201", "DECLINED-INVALID-CREDIT-PARTY", "9", "DECLINED"), idem.StateFailed},
		{"declined in a 202", 202, tx("90000", "DECLINED", "9", "DECLINED"), idem.StateFailed},
		{"rejected", 200, tx("30000", "REJECTED", "3", "REJECTED"), idem.StateFailed},
		{"completed", 201, tx("70000", "COMPLETED", "7", "COMPLETED"), idem.StateSucceeded},
		{"completed in a 202", 202, tx("70000", "COMPLETED", "7", "COMPLETED"), idem.StateSucceeded},
		{"submitted in a 202", 202, tx("50000", "SUBMITTED", "5", "SUBMITTED"), idem.StateProcessing},
		{"reversed after it was made", 200, tx("80000", "REVERSED", "8", "REVERSED"), idem.StateSucceeded},
		{"no class", 201, `{"id":7,"status":{"id":"90000","message":"DECLINED"}}`, idem.StateFailed},
		// An object with no code of digits is no status of this kind.
		{"envelope's status", 200, `{"id":7,"status":{"code":"E1","message":"declined"}}`, idem.StateSucceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: c.code, Body: []byte(c.body)})
			require.NoError(t, err)
			require.Equal(t, c.state, out.State)
			if c.name != "no class" && c.name != "envelope's status" {
				require.Equal(t, "2237071538", out.ResourceID)
			}
		})
	}
}
