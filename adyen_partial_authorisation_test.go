package idem_test

import (
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

// Adyen's card partial authorisation: "To accept a partially authorised
// transaction, send a /payments (v69+) request with the parameter
// additionalData.allowPartialAuth = true"
// (docs.adyen.com/payment-methods/cards/partial-authorisations); its
// answer's resultCode is then "PartiallyAuthorised", "The payment has
// been authorised for a partial amount. This happens for card payments
// when the merchant supports Partial Authorisations and the cardholder
// has insufficient funds", and its "amount" the "Authorised amount in the
// transaction" (Checkout API, PaymentResponse). The result endpoint by
// key is modelled (Adyen looks payments up by pspReference), as in
// TestAdyenPartPaymentIsNotItsOrdersAmount.
const adyenPartialAuthPayment = `{"merchantAccount":"ShopUS","reference":"ord-5120","amount":{"currency":"USD","value":10000},` +
	`"paymentMethod":{"type":"scheme","storedPaymentMethodId":"8416038790273850"},"shopperReference":"shopper-77",` +
	`"shopperInteraction":"ContAuth","recurringProcessingModel":"CardOnFile","additionalData":{"allowPartialAuth":"true"}}`

// adyenPartialAuthAnswer is a /payments answer: resultCode code, amount
// value of currency, merchantReference reference.
func adyenPartialAuthAnswer(code, currency, value, reference string) string {
	return `{"additionalData":{"authCode":"074315","cardSummary":"1111"},"pspReference":"QFQTPCQ8HXSKGK82","resultCode":"` + code +
		`","amount":{"currency":"` + currency + `","value":` + value + `},"merchantReference":"` + reference + `"}`
}

// decodeAdyenPartialAuth is decodeAdyen of a merchant that accepts
// partial authorisations: a partly authorised payment is made, its
// outstanding balance another payment's.
func decodeAdyenPartialAuth(a *idem.Answer) (idem.Outcome, error) {
	if strings.Contains(string(a.Body), `"resultCode":"PartiallyAuthorised"`) {
		a.Body = []byte(strings.Replace(string(a.Body), `"resultCode":"PartiallyAuthorised"`, `"resultCode":"Authorised"`, 1))
	}
	return decodeAdyen(a)
}

// Our payment of 100.00 USD, partial authorisation allowed, is
// authorised for 60.00 and its answer lost; the result query answers it.
// idem compared the authorised amount with the one asked for and left our
// authorised payment for a person as another request's (ReviewKeyInUse,
// ErrKeyConflict: 1 post, 1 payment made, 1 query), as if ours had never
// been made: told so, the shopper's order is charged again. Now ours,
// succeeded. An answer that cannot be a partial authorisation of ours
// is still another request's: one authorised in full for less, one for
// more than ours asked, one in another currency or of another
// reference, one of a request that did not allow a partial authorisation.
func TestAdyenPartialAuthorisationFoundByTheResultQuery(t *testing.T) {
	notAllowed := strings.Replace(adyenPartialAuthPayment, `,"additionalData":{"allowPartialAuth":"true"}`, ``, 1)
	for _, tt := range []struct {
		name, request, answer string
		how                   string // how another request's differs; "" for ours
	}{
		{"ours, partly authorised", adyenPartialAuthPayment, adyenPartialAuthAnswer("PartiallyAuthorised", "USD", "6000", "ord-5120"), ""},
		{"ours, partly authorised, its reference in capitals", adyenPartialAuthPayment, adyenPartialAuthAnswer("PartiallyAuthorised", "USD", "6000", "ORD-5120"), ""},
		{"another's, authorised in full for less", adyenPartialAuthPayment, adyenPartialAuthAnswer("Authorised", "USD", "6000", "ord-5120"),
			`amount.value "6000", not the request's amount.value "10000"`},
		{"another's, partly authorised for more than ours asked", adyenPartialAuthPayment, adyenPartialAuthAnswer("PartiallyAuthorised", "USD", "12000", "ord-5120"),
			`amount.value "12000", not the request's amount.value "10000"`},
		{"another's, another currency", adyenPartialAuthPayment, adyenPartialAuthAnswer("PartiallyAuthorised", "EUR", "6000", "ord-5120"),
			`amount.currency "EUR", not the request's amount.currency "USD"`},
		{"another's, another reference", adyenPartialAuthPayment, adyenPartialAuthAnswer("PartiallyAuthorised", "USD", "6000", "ord-5121"),
			`merchantReference "ord-5121", not the request's reference "ord-5120"`},
		{"ours did not allow a partial authorisation", notAllowed, adyenPartialAuthAnswer("PartiallyAuthorised", "USD", "6000", "ord-5120"),
			`amount.value "6000", not the request's amount.value "10000"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := "QFQTPCQ8HXSKGK82"
			if tt.how != "" {
				id = ""
			}
			s := &lostAnswerServer{header: "Idempotency-Key", result: tt.answer}
			s.requireFoundByTheQuery(t, decodeAdyenPartialAuth, idem.Request{Key: "ord-5120-auth-1", URL: "/checkout/v71/payments", Body: []byte(tt.request)}, id, tt.how)
		})
	}
}

// An order partly authorised is paid in parts of one reference: "You can
// decide how to follow up, such as prompting the shopper for a second
// payment method to collect the outstanding balance"
// (docs.adyen.com/online-payments/partial-authorizations), a payment that
// names the order, "order.pspReference, order.orderData", and is answered
// with the order, its "remainingAmount" (docs.adyen.com/online-payments/
// partial-payments; CheckoutOrderResponse). The order's shape in a
// partial authorisation's answer is modelled on it.
const (
	adyenOrderFirstPayment = `{"merchantAccount":"ShopUS","reference":"ord-5120","amount":{"currency":"USD","value":10000},` +
		`"paymentMethod":{"type":"scheme","storedPaymentMethodId":"8416038790273850"},"additionalData":{"allowPartialAuth":"true"}}`
	adyenOrderBalancePayment = `{"merchantAccount":"ShopUS","reference":"ord-5120","amount":{"currency":"USD","value":7000},` +
		`"paymentMethod":{"type":"scheme","storedPaymentMethodId":"4111038790271111"},"additionalData":{"allowPartialAuth":"true"},` +
		`"order":{"pspReference":"8816178952380553","orderData":"Ab02b4c0"}}`
)

// adyenOrderPartAnswer is a payment of the order ord-5120 of 100.00 USD,
// partly authorised for value, remaining the order's balance after it.
func adyenOrderPartAnswer(psp, value, remaining string) string {
	return `{"pspReference":"` + psp + `","resultCode":"PartiallyAuthorised","merchantReference":"ord-5120",` +
		`"amount":{"currency":"USD","value":` + value + `},"order":{"amount":{"currency":"USD","value":10000},` +
		`"remainingAmount":{"currency":"USD","value":` + remaining + `},"orderData":"Ab03c5d1",` +
		`"pspReference":"8816178952380553","reference":"ord-5120"}}`
}

// The order's first payment, 100.00 asked and 30.00 authorised, and its
// balance payment, 70.00 asked and 50.00 authorised, share the
// reference, the currency and a partial authorisation: only the amount
// tells them apart, and each one's authorised part is below the other's
// amount asked. A key both used (one derived from the order's reference)
// and a lost answer: the other payment's answer, read as our authorised
// part, settled succeeded as ours, and ours was never made (the balance
// never collected). The part authorised and the order's remainingAmount
// after it make the amount asked: only ours adds up. A balance payment's
// answer without the order to add up is another request's.
func TestAdyenPartialAuthorisationOfTheOrdersOtherPayment(t *testing.T) {
	noOrder := func(answer string) string {
		i := strings.Index(answer, `,"order":`)
		return answer[:i] + `}`
	}
	for _, tt := range []struct {
		name, request, answer string
		how                   string // how another request's differs; "" for ours
	}{
		{"ours, the first payment", adyenOrderFirstPayment, adyenOrderPartAnswer("QFQTPCQ8HXSKGK82", "3000", "7000"), ""},
		{"ours, the balance payment", adyenOrderBalancePayment, adyenOrderPartAnswer("ZC4R4RBFJGXXGN82", "5000", "2000"), ""},
		{"the first payment's, to the balance payment", adyenOrderBalancePayment, adyenOrderPartAnswer("QFQTPCQ8HXSKGK82", "3000", "7000"),
			`amount.value "3000", not the request's amount.value "7000"`},
		{"the balance payment's, to the first payment", adyenOrderFirstPayment, adyenOrderPartAnswer("ZC4R4RBFJGXXGN82", "5000", "2000"),
			`amount.value "5000", not the request's amount.value "10000"`},
		{"the first payment's without its order, to the balance payment", adyenOrderBalancePayment,
			noOrder(adyenOrderPartAnswer("QFQTPCQ8HXSKGK82", "3000", "7000")), `amount.value "3000", not the request's amount.value "7000"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var id string
			if tt.how == "" {
				id = strings.TrimPrefix(tt.answer, `{"pspReference":"`)[:16]
			}
			s := &lostAnswerServer{header: "Idempotency-Key", result: tt.answer}
			s.requireFoundByTheQuery(t, decodeAdyenPartialAuth, idem.Request{Key: "ord-5120-auth", URL: "/checkout/v71/payments", Body: []byte(tt.request)}, id, tt.how)
		})
	}
}
