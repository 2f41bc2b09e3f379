package idem_test

import (
	"fmt"
	"testing"
)

// payPalOrderFor is PayPal's Orders v2 order as a create answers it with
// "Prefer: return=representation", of 100.00 USD, its purchase unit
// carrying the merchant's invoice_id and custom_id: "The API
// caller-provided external invoice number for this order", "The API
// caller-provided external ID. Used to reconcile client transactions with
// PayPal transactions" (Create order's purchase_unit_request; the order's
// purchase_unit answers both as sent).
func payPalOrderFor(id int, invoice, custom string) string {
	return fmt.Sprintf(`{"id":"5O190127TN36471%02d","intent":"CAPTURE","status":"CREATED","purchase_units":[{"reference_id":"default",`+
		`"invoice_id":%q,"custom_id":%q,"amount":{"currency_code":"USD","value":"100.00"},"payee":{"merchant_id":"K75H4EE58B5FL"}}],`+
		`"create_time":"2026-12-06T12:00:00Z"}`, id, invoice, custom)
}

const payPalInvoiced = `{"intent":"CAPTURE","purchase_units":[{"invoice_id":"INV-2026-0042","custom_id":"cart-7f3a",` +
	`"amount":{"currency_code":"USD","value":"100.00"}}]}`

// The request id is another order's, of our amount and currency (the
// PayPal-Request-Id reused as TestPayPalStoredOrderOfAnotherRequestAfterTheIDWasHeld
// models it): the one member telling the two orders apart is the
// merchant's own invoice_id or custom_id in the purchase unit, which
// PayPal answers as sent. idem compared only the amount and took the
// other order (INV-2026-0041) for ours: succeeded with 5O190127TN3647142,
// the buyer sent to approve another cart's order, ours never created.
// Now left for a person (ReviewKeyInUse), no order taken, none made.
func TestPayPalStoredOrderOfAnotherInvoiceOfTheSameAmount(t *testing.T) {
	for _, tt := range []struct{ name, invoice, custom, names string }{
		{"another invoice_id", "INV-2026-0041", "cart-7f3a",
			`purchase_units.0.invoice_id "INV-2026-0041", not the request's purchase_units.0.invoice_id "INV-2026-0042"`},
		{"another custom_id", "INV-2026-0042", "cart-9c1e",
			`purchase_units.0.custom_id "cart-9c1e", not the request's purchase_units.0.custom_id "cart-7f3a"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requirePayPalOtherOrder(t, payPalInvoiced, payPalOrderFor(42, tt.invoice, tt.custom), tt.names)
		})
	}
}

// The order holding the id is a copy of ours, its invoice_id and
// custom_id ours (the case PayPal writes otherwise is spelling): ours,
// succeeded, no person asked.
func TestPayPalStoredOrderOfOurInvoiceSettles(t *testing.T) {
	for _, invoice := range []string{"INV-2026-0042", "inv-2026-0042"} {
		t.Run(invoice, func(t *testing.T) {
			f, c, req := payPalServer(t, payPalInvoiced)
			f.stored[payPalKey] = payPalOrderFor(1, invoice, "cart-7f3a")
			f.made = 1

			f.requireOursAfterTheKeyWasHeld(t, c, req, "5O190127TN3647101")
		})
	}
}
