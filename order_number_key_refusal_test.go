package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A caller's own key may be its order-draft number (DESIGN's
// vocabulary): digits, as shops number their orders. An order service
// that keeps the key as the order's key refuses one it holds 400 with
// the key between its subject and "already", as it came: "Order %s
// already exists for user %s" (a public Spring order service's
// OrderServiceImpl.create, BadRequestException with
// String.format("Order %s already exists for user %s", idempotencyKey,
// userId)). Since keys were passed over only where they are
// "distinctive" (five characters mixing letters and digits, or sixteen),
// "1001" was read as a word, the refusal lost its subject, and a first
// attempt was failed: but the order may be a copy of this one (a mesh's
// retry, net/http's resend), and a caller told "failed" orders again
// under a new number. A key that is no word (it has a digit or a sign
// in it) is passed over as an id wherever it stands.
func TestOrderNumberKeyInARefusal(t *testing.T) {
	for _, key := range []string{"1001", "100000123", "INV-A"} {
		t.Run(key, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadRequest,
				body: `{"code":"BAD_REQUEST","message":"Order ` + key + ` already exists for user 42"}`})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: v.srv.URL + "/orders", Body: []byte(`{"userId":42,"totalPrice":100}`)})
			requireForeignKey(t, res, err)
			v.requireKeys(t, "Idempotency-Key", key, 1)
		})
	}
}
