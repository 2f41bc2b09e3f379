package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A key in the body's client_order_id that is a common word ("order",
// "email": a business id taken as it came) was passed over in a
// refusal's words as a client order id is in Interactive Brokers' "Local
// order ID=<cOID> is already registered.", wherever it stood: Rails'
// uniqueness error for client_order_id, "Client order has already been
// taken" (its full message humanizes the attribute without "_id"), lost
// its subject to key "order" and was read as the order's own failure,
// inviting the order again under a new id; and "Order email has already
// been taken", about an order_email attribute, found the subject "Order"
// once key "email" was passed over: a validation error left for a
// person as another request's order. The key is passed over only where
// it stands as an id: a distinctive one, or one after an id's name.
func TestKeyOfACommonWordInARefusal(t *testing.T) {
	for _, tc := range []struct {
		key, body string
		duplicate bool
	}{
		{"order", `{"errors":["Client order has already been taken"]}`, true},
		{"email", `{"errors":["Order email has already been taken"]}`, false},
		{"payment", `{"errors":["Client order has already been taken"]}`, true},
	} {
		t.Run(tc.key+": "+tc.body, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusUnprocessableEntity, body: tc.body})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
			body := `{"client_order_id":"` + tc.key + `","amount":100}`
			res, err := c.Submit(t.Context(), idem.Request{Key: tc.key, URL: v.srv.URL + "/orders", Body: []byte(body)})
			if tc.duplicate {
				requireForeignKey(t, res, err)
			} else {
				require.ErrorIs(t, err, idem.ErrFailed)
				require.Equal(t, idem.StateFailed, res.State)
			}
			v.requireBodies(t, body, 1)
		})
	}
}
