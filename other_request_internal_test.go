package idem

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestOtherRequest: which answers describe another request than the
// journaled body, and which only spell the same one their own way.
func TestOtherRequest(t *testing.T) {
	const form = "symbol=BTCUSDT&side=BUY&type=LIMIT&quantity=1&price=91500&newClientOrderId=ord-9"
	const order = `{"symbol":"BTCUSDT","side":"Buy","qty":"0.1","orderLinkId":"ord-9"}`
	const paypal = `{"intent":"CAPTURE","purchase_units":[{"reference_id":"default","amount":{"currency_code":"USD","value":"100.00"}}]}`
	// Adyen's /payments, a part of a partial-payments order: the answer's
	// "order" is that order, its "amount" the order's initial one.
	const adyenPart = `{"merchantAccount":"M","reference":"p-1","amount":{"currency":"EUR","value":2500},"order":{"pspReference":"8815","orderData":"Ab02"}}`
	adyenPartAnswer := func(own string) string {
		return `{"pspReference":"9915","resultCode":"Authorised","merchantReference":"p-1",` + own +
			`"order":{"amount":{"currency":"EUR","value":10000},"remainingAmount":{"currency":"EUR","value":7500},"pspReference":"8815","reference":"o-1","orderData":"Ab03"}}`
	}
	// Mercado Pago's /v1/payments, Paddle's transactions and Primer's
	// payments name the amount or currency code at the top level.
	const mercadoPago = `{"transaction_amount":125.98,"token":"t","installments":1,"payment_method_id":"visa","payer":{"email":"a@b.c"}}`
	const paddle = `{"items":[{"price_id":"pri_1","quantity":1}],"currency_code":"USD","customer_id":"ctm_1"}`
	const primer = `{"orderId":"order-abc","currencyCode":"EUR","amount":42,"paymentMethodToken":"tok"}`
	const coinbase = `{"client_order_id":"ord-9","product_id":"BTC-USD","side":"BUY","order_configuration":{"market_market_ioc":{"quote_size":"10"}}}`
	for _, tt := range []struct {
		name, body, answer, want string
	}{
		{"binance, same order", form, `{"symbol":"BTCUSDT","side":"BUY","origQty":"1.00000000","price":"91500.00000000","status":"FILLED"}`, ""},
		{"binance, another side", form, `{"symbol":"BTCUSDT","side":"SELL","origQty":"1.00000000","status":"FILLED"}`, `side "SELL", not the request's side "BUY"`},
		{"binance, another quantity", form, `{"symbol":"BTCUSDT","side":"BUY","origQty":"2.00000000"}`, `origQty "2.00000000", not the request's quantity "1"`},
		{"binance, another price", form, `{"symbol":"BTCUSDT","side":"BUY","price":"91400.00"}`, `price "91400.00"`},
		{"the answer's own quantity is read before the alias", form, `{"quantity":"1","origQty":"3"}`, ""},
		{"bybit's list, same order", order, `{"retCode":0,"result":{"list":[{"symbol":"BTCUSDT","side":"Buy","qty":"0.100000","price":"0"}]}}`, ""},
		{"bybit's list, another side", order, `{"retCode":0,"result":{"list":[{"symbol":"BTCUSDT","side":"Sell","qty":"0.1"}]}}`, `side "Sell"`},
		{"okx's data list, another symbol", order, `{"code":"0","data":[{"symbol":"ETHUSDT"}]}`, `symbol "ETHUSDT"`},
		{"coinbase's order member, same", order, `{"order":{"symbol":"btc-usdt","side":"BUY"}}`, ""},
		{"coinbase's create, same order", coinbase, `{"success":true,"success_response":{"order_id":"1","product_id":"BTC-USD","side":"BUY","client_order_id":"ord-9"}}`, ""},
		{"coinbase's create, another product", coinbase, `{"success":true,"success_response":{"order_id":"1","product_id":"ETH-USD","side":"BUY"}}`, `product_id "ETH-USD", not the request's product_id "BTC-USD"`},
		{"coinbase's create, the USDC product answered by its USD alias", `{"product_id":"BTC-USDC","side":"BUY"}`, `{"success":true,"success_response":{"order_id":"1","product_id":"BTC-USD","side":"BUY"}}`, ""},
		{"coinbase's order, the USD product answered by its USDC alias", coinbase, `{"order":{"order_id":"1","product_id":"BTC-USDC","side":"BUY"}}`, ""},
		{"coinbase's create, another base behind the alias", `{"product_id":"BTC-USDC","side":"BUY"}`, `{"success_response":{"order_id":"1","product_id":"ETH-USD"}}`, `product_id "ETH-USD", not the request's product_id "BTC-USDC"`},
		{"coinbase's create, another quote than the alias's", `{"product_id":"BTC-USDC","side":"BUY"}`, `{"success_response":{"order_id":"1","product_id":"BTC-USDT"}}`, `product_id "BTC-USDT"`},
		{"a list of several proves nothing", order, `{"data":[{"side":"Sell"},{"side":"Buy"}]}`, ""},
		{"deeper than the envelope proves nothing", order, `{"data":{"result":{"order":{"side":"Sell"}}}}`, ""},
		{"a top-level list of one", order, `[{"side":"Sell"}]`, `side "Sell"`},
		{"a number and a word prove nothing", order, `{"qty":"ten"}`, ""},
		{"an exponent is not read", order, `{"qty":1e100000000}`, ""},
		{"an object in place of a value proves nothing", `{"amount":1000,"currency":"EUR"}`, `{"amount":{"value":1000,"currency":"EUR"}}`, ""},
		{"moov's amount object, same", `{"amount":{"currency":"USD","value":1000}}`, `{"transferID":"t","amount":{"currency":"usd","value":1000}}`, ""},
		{"moov's amount object, another value", `{"amount":{"currency":"USD","value":1000}}`, `{"transferID":"t","amount":{"currency":"USD","value":250000}}`, `amount.value "250000", not the request's amount.value "1000"`},
		{"adyen's amount object, another currency", `{"amount":{"currency":"EUR","value":1000}}`, `{"amount":{"currency":"GBP","value":1000}}`, `amount.currency "GBP"`},
		{"a plain amount and an amount object prove nothing", `{"amount":10,"currency":"EUR"}`, `{"amount":{"value":1000,"currency":"EUR"}}`, ""},
		{"a form's dotted name is not read", "amount.value=1000", `{"amount":{"value":5}}`, ""},
		{"stripe, another amount", "amount=2000&currency=usd", `{"id":"pi_1","amount":5000,"currency":"usd"}`, `amount "5000", not the request's amount "2000"`},
		{"a price amended and the side another: the side named", form, `{"symbol":"BTCUSDT","price":"91400","side":"SELL"}`, `side "SELL"`},
		{"stripe, another amount and currency: the currency named", "amount=2000&currency=usd", `{"id":"pi_1","amount":5000,"currency":"eur"}`, `currency "eur"`},
		{"stripe, same, currency's case", "amount=2000&currency=usd", `{"id":"pi_1","amount":2000.0,"currency":"USD"}`, ""},
		{"a nested form name is not read", "order[amount]=2000", `{"amount":5000}`, ""},
		{"a repeated form name is not read", "amount=2000&amount=3000", `{"amount":5000}`, ""},
		{"paypal's purchase unit, same, spelled otherwise", paypal, `{"id":"5O1","status":"CREATED","purchase_units":[{"amount":{"currency_code":"usd","value":"100.0"}}]}`, ""},
		{"paypal's purchase unit, another value", paypal, `{"id":"5O1","purchase_units":[{"amount":{"currency_code":"USD","value":"55.00"}}]}`,
			`purchase_units.0.amount.value "55.00", not the request's purchase_units.0.amount.value "100.00"`},
		{"paypal's purchase unit, another currency", paypal, `{"purchase_units":[{"amount":{"currency_code":"EUR","value":"55.00"}}]}`,
			`purchase_units.0.amount.currency_code "EUR"`},
		{"paypal's minimal answer proves nothing", paypal, `{"id":"5O1","status":"CREATED","links":[]}`, ""},
		{"an answer's list of several proves nothing", paypal, `{"purchase_units":[{"amount":{"value":"1"}},{"amount":{"value":"99"}}]}`, ""},
		{"another path proves nothing", paypal, `{"purchase_units":[{"payments":{"captures":[{"amount":{"currency_code":"USD","value":"40.00"}}]}}]}`, ""},
		{"mercado pago's envelope, another amount", `{"wallet_payment":{"transaction_amount":125.98},"payer":{"token":"t"}}`,
			`{"id":1,"wallet_payment":{"transaction_amount":700.5},"payments":[{"transaction_amount":700.5}]}`, `wallet_payment.transaction_amount "700.5"`},
		{"mercado pago's envelope, same", `{"wallet_payment":{"transaction_amount":125.98},"payer":{"token":"t"}}`,
			`{"id":1,"wallet_payment":{"transaction_amount":"125.980"}}`, ""},
		{"a money object, another amount", `{"idempotency_key":"k","amount_money":{"amount":100,"currency":"USD"}}`,
			`{"id":"p","amount_money":{"amount":250,"currency":"USD"}}`, `amount_money.amount "250"`},
		{"square's payment member is no envelope", `{"idempotency_key":"k","amount_money":{"amount":100,"currency":"USD"}}`,
			`{"payment":{"id":"p","amount_money":{"amount":250,"currency":"USD"}}}`, ""},
		{"square's order envelope, answered in it", `{"order":{"location_id":"L","line_items":[{"quantity":"1","base_price_money":{"amount":1500,"currency":"USD"}}]}}`,
			`{"order":{"id":"o","line_items":[{"quantity":"2","base_price_money":{"amount":1500,"currency":"USD"}}]}}`, `order.line_items.0.quantity "2"`},
		{"a request's envelope, answered without it", `{"transaction":{"amount":"12.00","currency":"GBP"}}`, `{"id":"t","amount":"12.00","currency":"EUR"}`,
			`currency "EUR", not the request's transaction.currency "GBP"`},
		{"a request's list of several is not read", `{"items":[{"price":1},{"price":2}]}`, `{"items":[{"price":5}]}`, ""},
		{"a money object's other members are not read", `{"amount":{"value":1,"breakdown":{"item_total":{"value":1}}}}`, `{"amount":{"value":1,"breakdown":{"item_total":{"value":7}}}}`, ""},
		{"a value outside money is not read", `{"metadata":{"value":"a"}}`, `{"metadata":{"value":"b"}}`, ""},
		{"a dotted name is not read", `{"x":{"amount.value":1}}`, `{"x":{"amount":{"value":2}}}`, ""},
		{"a dotted amount is not read", `{"x":{"tip.amount":1}}`, `{"x":{"tip":{"amount":2}}}`, ""},
		{"deeper than the walk is not read", `{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"amount":1}}}}}}}}`, `{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"amount":2}}}}}}}}`, ""},
		{"adyen's part payment, its order's amount beside it", adyenPart, adyenPartAnswer(`"amount":{"currency":"EUR","value":2500},`), ""},
		{"adyen's part payment answered without its own amount", adyenPart, adyenPartAnswer(""), ""},
		{"adyen's part payment of another amount", adyenPart, adyenPartAnswer(`"amount":{"currency":"EUR","value":4000},`),
			`amount.value "4000", not the request's amount.value "2500"`},
		{"mercado pago's top-level transaction_amount, another", mercadoPago, `{"id":1,"status":"approved","transaction_amount":700.5,"transaction_amount_refunded":0}`,
			`transaction_amount "700.5", not the request's transaction_amount "125.98"`},
		{"mercado pago's top-level transaction_amount, same", mercadoPago, `{"id":1,"transaction_amount":"125.980","transaction_amount_refunded":125.98,` +
			`"transaction_details":{"net_received_amount":119.3,"total_paid_amount":125.98}}`, ""},
		{"an answer's amount the request does not name proves nothing", mercadoPago, `{"id":1,"net_amount":7,"amount_refunded":9}`, ""},
		{"a top-level amount answered in an envelope", mercadoPago, `{"data":{"transaction_amount":700.5}}`, `transaction_amount "700.5"`},
		{"paddle's top-level currency_code, another", paddle, `{"data":{"id":"txn_1","status":"ready","currency_code":"EUR","items":[{"price_id":"pri_1","quantity":1}]}}`,
			`currency_code "EUR", not the request's currency_code "USD"`},
		{"paddle's top-level currency_code, same", paddle, `{"data":{"id":"txn_1","status":"ready","currency_code":"usd","items":[{"price_id":"pri_1","quantity":1}]}}`, ""},
		{"primer's top-level currencyCode, another", primer, `{"id":"kHdEw9EG","status":"AUTHORIZED","orderId":"order-abc","currencyCode":"GBP","amount":42}`,
			`currencyCode "GBP", not the request's currencyCode "EUR"`},
		{"primer's payment, same", primer, `{"id":"kHdEw9EG","status":"AUTHORIZED","orderId":"order-abc","currencyCode":"EUR","amount":42}`, ""},
		// A part of the amount at the top level proves nothing: Toss's
		// partial cancel is answered with the payment, whose taxFreeAmount
		// is the payment's; a discount or fee may be counted the
		// server's way. The amount itself still is compared.
		{"toss's partial cancel answered with the payment's tax-free amount", `{"cancelReason":"r","cancelAmount":5000,"taxFreeAmount":1000}`,
			`{"paymentKey":"pk","status":"PARTIAL_CANCELED","totalAmount":20000,"taxFreeAmount":3000,"cancels":[{"cancelAmount":5000,"taxFreeAmount":1000}]}`, ""},
		{"a coupon, fee or tip amount counted the server's way", `{"transaction_amount":100,"coupon_amount":10,"application_fee_amount":3,"tip_amount":5}`,
			`{"id":1,"transaction_amount":100,"coupon_amount":12,"application_fee_amount":4,"tip_amount":7}`, ""},
		{"the amount beside a coupon amount, another", `{"transaction_amount":100,"coupon_amount":10}`, `{"id":1,"transaction_amount":700,"coupon_amount":10}`,
			`transaction_amount "700", not the request's transaction_amount "100"`},
		// An answer naming the amount asked for beside its own compares
		// the request's by that: Checkout.com's partial authorization.
		{"checkout's partial authorization, the amount requested", `{"amount":10000,"currency":"USD","partial_authorization":{"enabled":true}}`,
			`{"id":"pay_1","amount":6000,"amount_requested":10000,"currency":"USD","status":"Authorized"}`, ""},
		{"checkout's partial authorization, another amount requested", `{"amount":10000,"currency":"USD"}`,
			`{"id":"pay_1","amount":6000,"amount_requested":7000,"currency":"USD"}`, `amount_requested "7000", not the request's amount "10000"`},
		{"a requestedAmount beside a transaction amount", `{"transactionAmount":100}`, `{"transactionAmount":60,"requestedTransactionAmount":100}`, ""},
		{"a nested amount has no requested name", `{"amount":{"value":100}}`, `{"amount":{"value":60},"amount_requested":100}`, `amount.value "60"`},
		{"no body", "", `{"amount":5000}`, ""},
		{"not JSON", order, `<html>`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, fixed := otherRequest([]byte(tt.body), []byte(tt.answer), nil)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("otherRequest() = %q; want %q", got, tt.want)
			}
			// Side, symbol and currency are no amendment's: listed here, not
			// read from amendable, which this would otherwise test against
			// itself.
			named, _, _ := strings.Cut(tt.want, " ")
			wantFixed := tt.want != "" && slices.Contains([]string{"symbol", "instrument_name", "product_id", "side", "currency", "currency_code", "currencyCode"},
				named[strings.LastIndex(named, ".")+1:])
			if fixed != wantFixed {
				t.Errorf("otherRequest() fixed = %v; want %v", fixed, wantFixed)
			}
		})
	}
	// Pinned apart from the loop's cases too: a
	// currency_code, however deep, is no amendment's (a submit's own
	// success is flagged only for such a member).
	if got, fixed := otherRequest([]byte(paypal), []byte(`{"purchase_units":[{"amount":{"currency_code":"EUR","value":"100.00"}}]}`), nil); !fixed {
		t.Errorf("otherRequest() = %q, fixed false: another currency_code is no amendment's", got)
	}
	// And at the top level, whatever its spelling: Paddle's
	// "currency_code", Primer's "currencyCode".
	for _, tt := range [][2]string{
		{paddle, `{"data":{"currency_code":"EUR"}}`},
		{primer, `{"currencyCode":"GBP","amount":42}`},
	} {
		if got, fixed := otherRequest([]byte(tt[0]), []byte(tt[1]), nil); !fixed {
			t.Errorf("otherRequest(%s) = %q, fixed false: another currency code is no amendment's", tt[1], got)
		}
	}
	var many strings.Builder
	for i := range 2 * nestedMost {
		fmt.Fprintf(&many, `"u%03d":{"amount":1},`, i)
	}
	if got, _ := otherRequest([]byte(`{`+many.String()+`"z":{"amount":1}}`), []byte(`{"z":{"amount":2}}`), nil); got != "" {
		t.Errorf("otherRequest() = %q: the member past the cap compared", got)
	}
	if got, _ := otherRequest([]byte(`{`+many.String()+`"z":{"amount":1}}`), []byte(`{"u000":{"amount":2}}`), nil); got == "" {
		t.Errorf("otherRequest() = %q: the member within the cap not compared", got)
	}
	if got, _ := otherRequest([]byte(`{"symbol":"BTCUSDT"}`), []byte(`{"symbol":"`+`\u0001`+strings.Repeat("x", 200)+`"}`), nil); len(got) > 200 || strings.Contains(got, "\x01") {
		t.Errorf("otherRequest() = %q: not bounded or not printable", got)
	}
}

// TestOtherRequestActedOn: an answer whose own id the request's path
// names is the resource the request acted on (Airwallex's capture answered
// with the PaymentIntent): its top-level amounts are that resource's and
// compared with nothing; its currency, its nested members, and any other
// resource's amounts still are.
func TestOtherRequestActedOn(t *testing.T) {
	const capture = `{"amount":50,"request_id":"k-1"}`
	intent := func(id, more string) string {
		return `{"id":"` + id + `","amount":100,"currency":"USD","status":"SUCCEEDED","captured_amount":50` + more + `}`
	}
	acted := pathSegments("https://api.airwallex.com/api/v1/pa/payment_intents/int_1/capture", "k-1")
	for _, tt := range []struct {
		name, body, answer, url, want string
	}{
		{"the intent captured, its own amount", capture, intent("int_1", ""), "", ""},
		{"another intent, its own amount", capture, intent("int_2", ""), "", `amount "100", not the request's amount "50"`},
		{"the intent, numeric id", capture, `{"id":1044,"amount":100}`, "https://h/v1/payments/1044/capture", ""},
		{"toss's paymentKey", `{"cancelAmount":5000}`, `{"paymentKey":"pk_1","cancelAmount":20000}`, "https://h/v1/payments/pk_1/cancel", ""},
		{"an amount object at the top", `{"amount":{"currency":"EUR","value":50}}`, `{"id":"int_1","amount":{"currency":"EUR","value":100}}`, "", ""},
		{"the intent, its currency", `{"amount":50,"currency":"USD"}`, intent("int_1", ""), "", ""},
		{"the intent, another currency code", `{"amount":50,"currency":"EUR"}`, intent("int_1", ""), "", `currency "USD", not the request's currency "EUR"`},
		{"the intent, another nested amount", `{"order":{"lines":[{"amount":50}]}}`, `{"id":"int_1","order":{"lines":[{"amount":70}]}}`, "",
			`order.lines.0.amount "70", not the request's order.lines.0.amount "50"`},
		{"a capture naming the intent as its parent", capture, `{"id":"cap_9","payment_intent_id":"int_1","amount":70}`, "",
			`amount "70", not the request's amount "50"`},
		{"a create at the key's id is no resource acted on", `{"amount":50}`, `{"id":"k-1","amount":100}`, "https://h/v1/transfers/k-1", `amount "100"`},
		{"a create at the key's id, a trailing slash", `{"amount":50}`, `{"id":"k-1","amount":100}`, "https://h/v1/transfers/k-1/", `amount "100"`},
		{"a create at the key's id, escaped", `{"amount":50}`, `{"id":"k-1","amount":100}`, "https://h/v1/transfers/k%2D1", `amount "100"`},
		{"the key naming the intent acted on", capture, `{"id":"k-1","amount":100}`, "https://h/v1/pa/payment_intents/k-1/capture", ""},
		{"the intent, its id escaped", capture, `{"id":"pay/1","amount":100}`, "https://h/v1/payments/pay%2F1/capture", ""},
		{"the intent, another currency in its amount object", `{"amount":{"currency":"EUR","value":50}}`,
			`{"id":"int_1","amount":{"currency":"USD","value":100}}`, "", `amount.currency "USD", not the request's amount.currency "EUR"`},
		// A payout's own output, as Worldline Direct's CreatePayout
		// answers it, is compared; not one of a payout the path names.
		{"a payout's output", `{"amountOfMoney":{"amount":50,"currencyCode":"EUR"}}`,
			`{"id":"po_1","payoutOutput":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}}}`, "https://h/v2/m/payouts",
			`amountOfMoney.amount "100", not the request's amountOfMoney.amount "50"`},
		{"the payout acted on, its output", `{"amountOfMoney":{"amount":50,"currencyCode":"EUR"}}`,
			`{"id":"po_1","payoutOutput":{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}}}`, "https://h/v2/m/payouts/po_1/cancel", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			segs := acted
			if tt.url != "" {
				segs = pathSegments(tt.url, "k-1")
			}
			got, _ := otherRequest([]byte(tt.body), []byte(tt.answer), segs)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("otherRequest() = %q; want %q", got, tt.want)
			}
		})
	}
}

// TestHeldOrderAnswer: which submit answers are worth comparing with the
// request, by one scan of the body.
func TestHeldOrderAnswer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"coinbase's 200 naming the key", 200, `{"success":true,"success_response":{"order_id":"1","client_order_id":"ord-9"}}`, true},
		{"a 201 Created was made for this request", 201, `{"id":"1","client_order_id":"ord-9"}`, false},
		{"an answer that does not name the key", 200, `{"id":"1"}`, false},
		{"no 2xx", 409, `{"client_order_id":"ord-9"}`, false},
	} {
		if got := heldOrderAnswer(tt.status, []byte(tt.body), "ord-9"); got != tt.want {
			t.Errorf("%s: heldOrderAnswer() = %v; want %v", tt.name, got, tt.want)
		}
	}
	if heldOrderAnswer(200, []byte(`{"id":"1"}`), "") {
		t.Error("heldOrderAnswer() with no key = true; want false")
	}
}

// TestNamesHeld: which answers name the held id as their own.
func TestNamesHeld(t *testing.T) {
	for _, tt := range []struct {
		body, held string
		want       bool
	}{
		{`{"id":"k","status":"succeeded","resourceId":"site-1"}`, "k", true},
		{`{"name":"operations/op-1","done":true,"response":{"name":"orders/o-1"}}`, "operations/op-1", true},
		{`{"operationId":"op-1","operationState":"Succeeded","resourceLocation":"/knowledgebases/kb-1"}`, "op-1", true},
		{`{"id":"ord_2","state":"succeeded"}`, "ord_1", false},
		{`{"resourceId":"ord_2","previous":"ord_1"}`, "ord_1", false},
		{`{"data":{"id":"ord_1","status":"succeeded","resourceId":"ord_2"}}`, "ord_1", true},
		{`{"data":{"id":"ord_1"},"meta":{"request_id":"r"}}`, "ord_1", true},
		{`{"data":{"id":"ord_2","status":"succeeded","resourceId":"ord_1"}}`, "ord_1", false},
		{`{"data":{"id":"ord_2"},"meta":{"request_id":"r"}}`, "ord_1", false},
		{`{"data":{"id":"ord_1"},"errors":[{"message":"x"}]}`, "ord_1", false},
		{`{"data":{"data":{"id":"ord_1"}}}`, "ord_1", false},
		{`{"result":{"id":"ord_1"}}`, "ord_1", false},
		{`{"id":1}`, "1", false},
		{`not json`, "k", false},
		{`{"id":""}`, "", false},
	} {
		if got := namesHeld([]byte(tt.body), tt.held); got != tt.want {
			t.Errorf("namesHeld(%s, %q) = %v; want %v", tt.body, tt.held, got, tt.want)
		}
	}
}
