package idem_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// decodePhemex reads Phemex's REST envelope as a user writes it
// (phemex-api-docs, Public-Contract-API-en.md: "Rest Response format"):
// code 0 for an order placed; any other code is the refusal, its name in
// "msg", answered 200 OK (the API keeps 401, 403, 429 and 5xx for the
// HTTP status).
var decodePhemex = decodeCodeMsg("0")

// Phemex's POST /orders names its refusals by engine-prefixed codes
// (TradingErrorCode.md; ccxt's phemex maps 10001 and 11085 to
// DuplicateOrderId, 11083 and 11095 to InvalidOrder): "TE_CL_ORD_ID_DUPLICATE"
// for a clOrdID it holds and "OM_DUPLICATE_ORDERID" for an order id given
// twice. To a first attempt whose copy went first (a sidecar's retry),
// both were ErrFailed: the prefix hid the subject ("te_cl_ord_id_" no
// ClOrdID, "om_" none), inviting the order again under a new id. They
// are the id's "already used": flagged ReviewKeyInUse, sent once. A
// take-profit or trailing order the position already holds is another
// subject's refusal: failed, as before.
func TestPrefixedCodeNameRefusalToAFirstAttempt(t *testing.T) {
	for _, tt := range []struct {
		msg     string
		code    int
		keyUsed bool
	}{
		{"TE_CL_ORD_ID_DUPLICATE", 11085, true},
		{"OM_DUPLICATE_ORDERID", 10001, true},
		{"TE_TAKE_PROFIT_ORDER_DUPLICATED", 11083, false},
		{"TE_TRAILING_ORDER_DUPLICATED", 11095, false},
	} {
		t.Run(tt.msg, func(t *testing.T) {
			answer, _ := json.Marshal(map[string]any{"code": tt.code, "msg": tt.msg, "data": nil})
			v := newVendor(t, shape{status: 200, body: string(answer)})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodePhemex))
			body := `{"actionBy":"FromOrderPlacement","symbol":"BTCUSD","clOrdID":"ord-7","side":"Sell","priceEp":93185000,"orderQty":7,"ordType":"Limit"}`
			req := idem.Request{Key: "ord-7", URL: v.srv.URL + "/orders", Body: []byte(body)}
			if tt.keyUsed {
				requireLeftForAPerson(t, c, req, tt.msg)
				v.requireBodies(t, body, 1)
				return
			}
			for range 2 { // the intent submitted again gets the journaled outcome
				res, err := c.Submit(t.Context(), req)
				require.ErrorIs(t, err, idem.ErrFailed)
				require.Equal(t, idem.StateFailed, res.State)
				require.Empty(t, res.Review)
				v.requireBodies(t, body, 1)
			}
		})
	}
}
