package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

// Mercado Pago's common create, POST /v1/payments, sends what the payment
// is at the body's top level, {"transaction_amount": 125.98, "token": …,
// "installments": 1, "payment_method_id": "visa", "payer": {…}}, and the
// payment answers it there too, beside "currency_id",
// "transaction_amount_refunded" and the "transaction_details" it adds
// ("net_received_amount", "total_paid_amount"; Payment creation results,
// mercadopago.com.br/developers/en/docs/checkout-api-payments/
// response-handling/collection-results). It takes X-Idempotency-Key
// ("you must send the X-Idempotency-Key attribute mandatorily", …/
// checkout-bricks/payment-brick/payment-submission/cards), and is
// modelled as answering a used key as Wallet Connect's advanced payments
// do (that page covers them, not /v1/payments): "If the payment has already been
// created, your information is returned without creating a new payment"
// (…/wallet-connect/payment-flow/idempotency); its 409 while the key's
// payment is processed is mercadoPagoBusy's (modelled on that page's
// Responses: /v1/payments documents none of its own).
func mercadoPagoCardPayment(id int, amount string) string {
	return fmt.Sprintf(`{"id":%d,"status":"approved","status_detail":"accredited","currency_id":"BRL","description":"Order 417",`+
		`"payment_method_id":"visa","payment_type_id":"credit_card","installments":1,"transaction_amount":%s,"transaction_amount_refunded":0,`+
		`"transaction_details":{"net_received_amount":119.3,"total_paid_amount":%s,"installment_amount":%s},"payer":{"id":"786547"}}`,
		20359900+id, amount, amount, amount)
}

func mercadoPagoCardServer(t testing.TB) (*firstAnswerServer, *idem.Client, idem.Request) {
	t.Helper()
	f := &firstAnswerServer{header: "X-Idempotency-Key", busyBody: mercadoPagoBusy, busy: 2, stored: map[string]string{},
		answer: func(id int, body []byte) string {
			var req struct {
				TransactionAmount json.Number `json:"transaction_amount"`
			}
			_ = json.Unmarshal(body, &req)
			return mercadoPagoCardPayment(id, req.TransactionAmount.String())
		}}
	srv, c := f.start(t, decodeStatusID("approved"))
	return f, c, idem.Request{Key: mercadoPagoKey, URL: srv.URL + "/v1/payments",
		Body: []byte(`{"transaction_amount":125.98,"token":"ff8080814c11e237014c1ff593b57b4d","description":"Order 417","installments":1,` +
			`"payment_method_id":"visa","payer":{"email":"buyer@example.com"}}`)}
}

// The key is another checkout's, its 700.50 card payment still being
// processed: our post gets the two 409s, then that payment's stored 200.
// idem read only the exact describing names at the body's top level, not
// "transaction_amount", and took the 200 for ours: succeeded with payment
// 20359942 after 3 posts, 0 payments made, our 125.98 never charged.
// Compared at transaction_amount, it is left for a person
// (ReviewKeyInUse), the other payment not taken.
func TestMercadoPagoCardPaymentOfAnotherCheckoutAfterTheKeyWasHeld(t *testing.T) {
	f, c, req := mercadoPagoCardServer(t)
	f.stored[mercadoPagoKey] = mercadoPagoCardPayment(42, "700.50")

	res, err := c.Submit(t.Context(), req)
	requireOtherRequestsAnswer(t, c, mercadoPagoKey, res, err, http.StatusOK, `transaction_amount "700.50", not the request's transaction_amount "125.98"`)
	f.requireKeys(t, mercadoPagoKey, 3, 0)
}

// The payment holding the key is a copy of ours, its amount spelled its
// own way, beside the members only an answer gives (its refunded, net and
// paid amounts, which our request never names): ours, succeeded, no
// person asked. Pinned: the top-level comparison must not flag our own
// payment.
func TestMercadoPagoCardPaymentOfACopyOfOursAfterTheKeyWasHeld(t *testing.T) {
	for _, amount := range []string{"125.98", "125.980", `"125.98"`} {
		t.Run(amount, func(t *testing.T) {
			f, c, req := mercadoPagoCardServer(t)
			f.stored[mercadoPagoKey] = mercadoPagoCardPayment(1, amount)
			f.made = 1

			f.requireOursAfterTheKeyWasHeld(t, c, req, "20359901")
		})
	}
}
