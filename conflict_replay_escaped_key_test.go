package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A server on PHP writes its JSON with json_encode, which escapes "/" as
// "\/" unless told not to (php-src ext/json/tests/json_encode_unescaped_slashes.phpt:
// json_encode('a/b') is "a\/b"). Its 409 carrying the key's first answer
// (Interchecks' and DOKU's habit, developers.doku.com/get-started-with-doku-api/idempotency-request)
// echoes a key with a "/" in it so escaped: the same value, other bytes.
// Looked for as bytes, the key was not found, and the paid payout was
// never settled: resent under the same key until the key window passed.
func TestConflictEchoingTheKeyEscapedSettles(t *testing.T) {
	const key = "payout/2026/0042"
	v := newVendor(t, gatewayTimeout, shape{status: http.StatusConflict,
		body: `{"id":"pmt_9f2c41","idempotency_key":"payout\/2026\/0042","amount":"25.00","currency":"USD","status":"PAID"}`})
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: v.srv.URL + "/v2/payouts",
		Body: []byte(`{"amount":"25.00","currency":"USD","card":"4444333322221111"}`)})
	requireOutcome(t, res, err, idem.StateSucceeded, nil, "pmt_9f2c41", "")
	v.requireKeys(t, "Idempotency-Key", key, 2)
}
