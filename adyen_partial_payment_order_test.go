package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Adyen's partial payments: "Make a POST /payments request including:
// amount — The payment amount. If this is less than the remainingAmount
// from the /orders response, it is a partial payment … order.pspReference,
// order.orderData", and "The response contains an order object that
// shows the remaining amount required on the order"
// (docs.adyen.com/online-payments/partial-payments), whose "amount" is
// "The initial amount of the order" (Checkout API, CheckoutOrderResponse)
// beside the payment's own "amount", "Authorised amount in the
// transaction" (PaymentResponse).
const adyenPartPayment = `{"merchantAccount":"ShopEU","reference":"cart-88-giftcard","amount":{"currency":"EUR","value":2500},` +
	`"paymentMethod":{"type":"giftcard","brand":"givex"},"order":{"pspReference":"8816178952380553","orderData":"Ab02b4c0"}}`

func adyenPartAnswer(value string) string {
	return `{"pspReference":"9916178952380561","resultCode":"Authorised","merchantReference":"cart-88-giftcard",` +
		`"amount":{"currency":"EUR","value":` + value + `},"order":{"amount":{"currency":"EUR","value":10000},` +
		`"remainingAmount":{"currency":"EUR","value":7500},"expiresAt":"2026-12-07T13:00:00Z","orderData":"Ab03c5d1",` +
		`"pspReference":"8816178952380553","reference":"cart-88"}}`
}

// The submit's connection drops and the result query answers our own
// 25.00 part of the 100.00 order (modelled: Adyen looks payments up by
// pspReference, not by key; a result endpoint by key, as
// WithResultEndpoint asks, answering the payment the key made). idem read
// the answer's "order" as an envelope of the payment and its 100.00 as the
// payment's amount: our authorised gift card payment was left for a
// person as another request's (ReviewKeyInUse, ErrKeyConflict). The
// answer's "order" answers the request's own "order": ours, succeeded. A
// payment of another amount is still another request's.
//
// So is one of our amount and currency, another gift card's part of the
// same order: the request's "reference" answered as "merchantReference",
// "The reference to uniquely identify a payment" (Adyen's
// PaymentResponse, @adyen/api-library), is not ours. It settled
// succeeded as ours, our part never paid. Ours in Adyen's spelling, its
// case its own, still settles.
func TestAdyenPartPaymentIsNotItsOrdersAmount(t *testing.T) {
	ownAs := func(reference string) string {
		return strings.Replace(adyenPartAnswer("2500"), `"merchantReference":"cart-88-giftcard"`, `"merchantReference":"`+reference+`"`, 1)
	}
	for _, tt := range []struct {
		name, answer string
		ours         bool
		how          string // how another request's differs
	}{
		{"ours", adyenPartAnswer("2500"), true, ""},
		{"another amount", adyenPartAnswer("4000"), false, `amount.value "4000", not the request's amount.value "2500"`},
		{"another part of the order, same amount", ownAs("cart-88-voucher"), false,
			`merchantReference "cart-88-voucher", not the request's reference "cart-88-giftcard"`},
		{"ours, its reference in capitals", ownAs("CART-88-GIFTCARD"), true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			s := &sharedKeyServer{result: tt.answer}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, clock, idem.WithKeyHeader("Idempotency-Key", idem.KeyBare), idem.WithDecoder(decodeAdyen),
				idem.WithResultEndpoint(srv.URL+"/checkout/v71/payments/by-key/{key}"))
			const key = "cart-88-giftcard-1"

			res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/checkout/v71/payments", Body: []byte(adyenPartPayment)})
			op, lerr := c.Lookup(t.Context(), idem.DefaultScope, key)
			require.NoError(t, lerr)
			if tt.ours {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "9916178952380561", res.ResourceID)
				require.Equal(t, idem.StateSucceeded, op.State)
				require.Empty(t, op.Review)
			} else {
				requireForeignKey(t, res, err)
				require.Equal(t, idem.StateUnknown, op.State)
				require.Equal(t, idem.ReviewKeyInUse, op.Review)
				require.Empty(t, resourceOf(op), "another request's payment taken for ours")
				rec, gerr := c.Store().Get(t.Context(), idem.DefaultScope, key)
				require.NoError(t, gerr)
				require.Contains(t, rec.Attempts[len(rec.Attempts)-1].Err, tt.how)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, []string{adyenPartPayment}, s.submits, "submits: one, never resent")
			require.Equal(t, 1, s.queries)
		})
	}
}
