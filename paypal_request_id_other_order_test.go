package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

// PayPal's Orders v2 create (POST /v2/checkout/orders) nests what the
// order is: {"intent": "CAPTURE", "purchase_units": [{"amount":
// {"currency_code": "USD", "value": "100.00"}}]}. Keyed by its
// PayPal-Request-Id header, "PayPal returns the latest status of the
// previous request that used that same header"
// (developer.paypal.com/api/rest/reference/idempotency); modelled: the
// page does not say whether this request's body is compared. And the create's "200 OK" is "A successful response to
// an idempotent request … with a JSON response body that shows order
// details" (Create order's responses; a fresh order is 201 Created). Of
// two simultaneous requests with one id "PayPal processes the first
// request and might fail the second request" (the same page): that
// failure is modelled as PayPal's RESOURCE_CONFLICT 409, "The server has
// detected a conflict while processing this request." (its error_409
// definition), the page naming no status.
const payPalBusy = `{"name":"RESOURCE_CONFLICT","message":"The server has detected a conflict while processing this request.",` +
	`"debug_id":"b1d1f06c7246c"}`

const payPalKey = "7b92603e-77ed-4896-8e78-5dea2050476a"

func payPalOrder(id int, currency, value string) string {
	return fmt.Sprintf(`{"id":"5O190127TN36471%02d","intent":"CAPTURE","status":"CREATED","purchase_units":[{"reference_id":"default",`+
		`"amount":{"currency_code":%q,"value":%s},"payee":{"merchant_id":"K75H4EE58B5FL"}}],"create_time":"2026-12-06T12:00:00Z",`+
		`"links":[{"href":"https://api-m.paypal.com/v2/checkout/orders/5O190127TN36471%02d","rel":"self","method":"GET"}]}`,
		id, currency, value, id)
}

func payPalServer(t testing.TB, body string) (*firstAnswerServer, *idem.Client, idem.Request) {
	t.Helper()
	f := &firstAnswerServer{header: "PayPal-Request-Id", busyBody: payPalBusy, busy: 2, stored: map[string]string{},
		answer: func(id int, body []byte) string {
			var req struct {
				PurchaseUnits []struct {
					Amount struct {
						CurrencyCode string          `json:"currency_code"`
						Value        json.RawMessage `json:"value"`
					} `json:"amount"`
				} `json:"purchase_units"`
			}
			_ = json.Unmarshal(body, &req)
			return payPalOrder(id, req.PurchaseUnits[0].Amount.CurrencyCode, string(req.PurchaseUnits[0].Amount.Value))
		}}
	srv, c := f.start(t, decodeStatusID("CREATED", "COMPLETED"))
	return f, c, idem.Request{Key: payPalKey, URL: srv.URL + "/v2/checkout/orders", Body: []byte(body)}
}

const payPalCreate = `{"intent":"CAPTURE","purchase_units":[{"reference_id":"default","invoice_id":"INV-2026-0042",` +
	`"amount":{"currency_code":"USD","value":"100.00"}}]}`

// The request id is another order's (one service's id generator reused
// by another, or a retry library's id kept across two carts): that
// order, 55.00 or in euros, is still being created when ours arrives, so
// ours gets the 409s, then its stored 200. idem compared only the body's
// top level, where PayPal's names no amount, and took the other order
// for ours: succeeded with 5O190127TN3647142, the buyer sent to approve
// another amount, ours never created. Compared at
// purchase_units.0.amount, it is left for a person (ReviewKeyInUse), the
// order not taken, no order made.
func TestPayPalStoredOrderOfAnotherRequestAfterTheIDWasHeld(t *testing.T) {
	for _, tt := range []struct {
		name, currency, value, names string
	}{
		{"another value", "USD", `"55.00"`, `purchase_units.0.amount.value "55.00", not the request's purchase_units.0.amount.value "100.00"`},
		{"another currency", "EUR", `"100.00"`, `purchase_units.0.amount.currency_code "EUR"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requirePayPalOtherOrder(t, payPalCreate, payPalOrder(42, tt.currency, tt.value), tt.names)
		})
	}
}

// requirePayPalOtherOrder submits body under a request id whose stored
// answer is stored, another order, and asserts it was left for a
// person, what differs, names, in its last attempt's error: three posts
// with the id, no order made.
func requirePayPalOtherOrder(t *testing.T, body, stored, names string) {
	t.Helper()
	f, c, req := payPalServer(t, body)
	f.stored[payPalKey] = stored

	res, err := c.Submit(t.Context(), req)
	requireOtherRequestsAnswer(t, c, payPalKey, res, err, http.StatusOK, names)
	f.requireKeys(t, payPalKey, 3, 0)
}

// The order holding the id is a copy of ours (a mesh's retry of our
// first post): the 409s, then its stored 200, our amount spelled as the
// copy's body or PayPal's answer may spell it (100 against "100.00",
// "100.0" or 100.00). Ours: succeeded, no person asked. Pinned: the
// nested comparison must not flag our own order.
func TestPayPalStoredOrderOfACopyOfOursAfterTheIDWasHeld(t *testing.T) {
	for _, tt := range []struct{ sent, stored string }{
		{`"100.00"`, `"100.00"`},
		{`100`, `"100.00"`},
		{`"100.00"`, `100`},
		{`100.00`, `"100.0"`},
	} {
		t.Run(tt.sent+" as "+tt.stored, func(t *testing.T) {
			f, c, req := payPalServer(t, `{"intent":"CAPTURE","purchase_units":[{"amount":{"currency_code":"USD","value":`+tt.sent+`}}]}`)
			f.stored[payPalKey] = payPalOrder(1, "usd", tt.stored)
			f.made = 1

			f.requireOursAfterTheKeyWasHeld(t, c, req, "5O190127TN3647101")
		})
	}
}
