package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A refusal in the error shapes errorReason did not read was journaled
// with the status's text alone ("400: Bad Request"), which tells the
// person reading the failure nothing of why: Telegram's "description",
// OAuth's "error_description" (its "error" is only a code), a
// camel-cased "errorMessage", and a code that names the error beside its
// message, which was dropped.
func TestErrorReasonMembers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		shape  shape
		reason string
	}{
		// https://core.telegram.org/bots/api#making-requests: "ok" false,
		// "the error is explained in the 'description'", an "error_code".
		{"telegram description", shape{status: http.StatusBadRequest,
			body: `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`}, "400: Bad Request: chat not found"},
		// RFC 6749 5.2: "error" is an ASCII code, "error_description"
		// the human-readable text (Box's oauth2-error:
		// developer.box.com/reference/resources/oauth2-error).
		{"oauth error description", shape{status: http.StatusUnauthorized,
			body: `{"error":"invalid_client","error_description":"The client credentials are not valid"}`},
			"401: invalid_client: The client credentials are not valid"},
		{"oauth error alone", shape{status: http.StatusUnauthorized, body: `{"error":"invalid_token"}`}, "401: invalid_token"},
		{"camel-cased errorMessage", shape{status: http.StatusBadRequest,
			body: `{"errorCode":"E1001","errorMessage":"Merchant account is suspended"}`}, "400: Merchant account is suspended"},
		// https://docs.tosspayments.com/reference/error-codes: {"code":…,"message":…}.
		{"toss code beside its message", shape{status: http.StatusBadRequest,
			body: `{"code":"INVALID_CARD_EXPIRATION","message":"카드 정보를 다시 확인해주세요. (유효기간)"}`},
			"400: INVALID_CARD_EXPIRATION: 카드 정보를 다시 확인해주세요. (유효기간)"},
		// A number is no name: Binance's {"code":-1013,"msg":…} stays its msg.
		{"numeric code", shape{status: http.StatusBadRequest, body: `{"code":-1013,"msg":"Filter failure: LOT_SIZE"}`},
			"400: Filter failure: LOT_SIZE"},
		{"numeric code string", shape{status: http.StatusBadRequest, body: `{"code":"51000","message":"Parameter sz error"}`},
			"400: Parameter sz error"},
	} {
		t.Run(tt.name, func(t *testing.T) { requireFailureReason(t, tt.shape, tt.reason) })
	}
}

// requireFailureReason asserts that a first submit answered with s fails
// at once with reason, the key sent once.
func requireFailureReason(t *testing.T, s shape, reason string) {
	t.Helper()
	v := newVendor(t, s)
	res, err := v.submit(t)
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Equal(t, reason, res.Reason)
	require.ErrorContains(t, err, reason)
	v.requireKeys(t, "Idempotency-Key", "k", 1)
}
