package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Mercado Pago's Wallet Connect POST /v1/advanced_payments nests what
// the payment is in an envelope, {"wallet_payment": {"transaction_amount":
// 125.98, …}, "payer": {…}}, and keys it by X-Idempotency-Key: "If the
// payment has already been created, your information is returned without
// creating a new payment" (mercadopago.com.ar/developers/en/docs/
// wallet-connect/payment-flow/idempotency). Its Responses page gives that
// answer as "Status code: 200", the payment with its "wallet_payment"
// and "payments", and, "when an payment is created and it is being
// processed", a 409 {"status":"409","error":"Conflict","message":"The
// process has not been completed yet. Try again later."}
// (…/idempotency/responses). Nothing in either says the stored payment is
// answered only to the body that made it.
const mercadoPagoBusy = `{"status":"409","error":"Conflict","message":"The process has not been completed yet. Try again later.",` +
	`"cause":[{"code":"401001","description":"The process has not been completed yet. Try again later."}]}`

const mercadoPagoKey = "checkout-2026-000417"

func mercadoPagoPayment(id int, amount string) string {
	return fmt.Sprintf(`{"id":%d,"status":"approved","wallet_payment":{"transaction_amount":%s,"description":"Payment for the purchase of furniture",`+
		`"external_reference":"Payment_seller_123"},"payments":[{"id":%d,"status":"approved","status_detail":"accredited",`+
		`"payment_method_id":"visa","transaction_amount":%s,"installments":1,"capture":true}],"payer":{"id":786547},"binary_mode":true}`,
		10458700+id, amount, 3870106200+id, amount)
}

func mercadoPagoServer(t testing.TB, busy int) (*firstAnswerServer, *idem.Client, idem.Request) {
	t.Helper()
	f := &firstAnswerServer{header: "X-Idempotency-Key", busyBody: mercadoPagoBusy, busy: busy, stored: map[string]string{},
		answer: func(id int, body []byte) string {
			var req struct {
				WalletPayment struct {
					TransactionAmount json.Number `json:"transaction_amount"`
				} `json:"wallet_payment"`
			}
			_ = json.Unmarshal(body, &req)
			return mercadoPagoPayment(id, req.WalletPayment.TransactionAmount.String())
		}}
	srv, c := f.start(t, decodeStatusID("approved"))
	return f, c, idem.Request{Key: mercadoPagoKey, URL: srv.URL + "/v1/advanced_payments",
		Body: []byte(`{"wallet_payment":{"transaction_amount":125.98,"description":"Payment for the purchase of furniture",` +
			`"external_reference":"Payment_seller_123"},"payer":{"token":"PAYER_TOKEN","type_token":"wallet-token"},"binary_mode":true}`)}
}

// The key is another checkout's (a key taken from a cart id the shop
// reused), its 700.50 payment still processing: our post gets the 409s,
// then that payment's stored 200. idem compared only the body's top
// level, where Mercado Pago's request names no amount, and took the 200
// for ours: succeeded with payment 10458742, our 125.98 never charged.
// Compared at wallet_payment.transaction_amount, it is left for a person
// (ReviewKeyInUse), its payment not taken, no payment made.
func TestMercadoPagoStoredPaymentOfAnotherCheckoutAfterTheKeyWasHeld(t *testing.T) {
	f, c, req := mercadoPagoServer(t, 2)
	f.stored[mercadoPagoKey] = mercadoPagoPayment(42, "700.50")

	res, err := c.Submit(t.Context(), req)
	requireOtherRequestsAnswer(t, c, mercadoPagoKey, res, err, http.StatusOK, `wallet_payment.transaction_amount "700.50"`)
	f.requireKeys(t, mercadoPagoKey, 3, 0)
}

// The payment holding the key is a copy of ours (a mesh's retry of our
// first post), stored with the amount spelled its own way: ours,
// succeeded, no person asked. Pinned: the nested comparison must not flag
// our own payment.
func TestMercadoPagoStoredPaymentOfACopyOfOursAfterTheKeyWasHeld(t *testing.T) {
	for _, amount := range []string{"125.98", "125.980", `"125.98"`} {
		t.Run(amount, func(t *testing.T) {
			f, c, req := mercadoPagoServer(t, 2)
			f.stored[mercadoPagoKey] = mercadoPagoPayment(1, amount)
			f.made = 1

			f.requireOursAfterTheKeyWasHeld(t, c, req, "10458701")
		})
	}
}

// The result-query path: the submit's connection drops before anything
// is made, and the result endpoint answers the key's payment, another
// checkout's 700.50 one, in Mercado Pago's advanced payment shape
// (modelled: Mercado Pago looks payments up by id, not by key; a result
// endpoint by key, as WithResultEndpoint asks, answering the payment the
// key holds, as TestProcessingQueryNamesNoResourceOfOurs's does). idem
// settled ours succeeded with it. Left for a person, never resent.
func TestMercadoPagoResultQueryFindingAnotherCheckoutsPayment(t *testing.T) {
	answer := func(amount string) string { return mercadoPagoPayment(42, amount) }
	requireQueriedResults(t, answer, "700.50", "125.980", func(srv *httptest.Server, clock *idemtest.Clock) (*idem.Client, idem.Request) {
		c := clientFor(t, srv, clock, idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare), idem.WithDecoder(decodeStatusID("approved")),
			idem.WithResultEndpoint(srv.URL+"/v1/advanced_payments/by-key/{key}"))
		const body = `{"wallet_payment":{"transaction_amount":125.98,"external_reference":"Payment_seller_123"},"payer":{"token":"PAYER_TOKEN"}}`
		return c, idem.Request{Key: mercadoPagoKey, URL: srv.URL + "/v1/advanced_payments", Body: []byte(body)}
	}, "10458742", `wallet_payment.transaction_amount "700.50"`)
}
