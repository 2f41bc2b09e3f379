package idem

import (
	"fmt"
	"strings"
	"testing"
)

// TestOtherRequestWorldlineSurchargeAmounts: Worldline Direct's
// surcharged payment (TestWorldlineReplayedPaymentOfAnotherRequest) with
// its amounts written as decimals, 2530.0 (modelled: its SDKs' amounts
// are longs, and a JSON number of integer value may come with a point
// from a proxy or a re-encoder), was compared by its currency alone,
// the net amount left unknown: another request's payment of our currency
// settled as ours. An integer's value is read whatever its spelling. A
// surcharge told in another currency than the payment's (modelled) was
// subtracted from the payment's amount all the same, and our own
// payment of 1000 EUR, surcharged 30 USD, read as 970 EUR, another
// request's: such a surcharge says nothing of the amount, of which only
// the currency is compared then.
func TestOtherRequestWorldlineSurchargeAmounts(t *testing.T) {
	const surcharged = `{"order":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"},"surchargeSpecificInput":{"mode":"on-behalf-of"}}}`
	answer := func(amount, currency, surcharge string) string {
		extra := ""
		if surcharge != "" {
			extra = fmt.Sprintf(`,"surchargeSpecificOutput":{"mode":"on-behalf-of","surchargeAmount":%s}`, surcharge)
		}
		return fmt.Sprintf(`{"payment":{"id":"3066019730_0","paymentOutput":{"amountOfMoney":{"amount":%s,"currencyCode":%q}%s},"status":"CAPTURED"}}`,
			amount, currency, extra)
	}
	for _, tt := range []struct {
		name, answer, want string
	}{
		{"another net amount, the gross written 2530.0", answer("2530.0", "EUR", `{"amount":30,"currencyCode":"EUR"}`),
			`amountOfMoney.amount less its surcharge "2500", not the request's order.amountOfMoney.amount "1000"`},
		{"another net amount, the surcharge written 30.0", answer("2530", "EUR", `{"amount":30.0,"currencyCode":"EUR"}`),
			`amountOfMoney.amount less its surcharge "2500"`},
		{"another amount, none applied, written 2500.0", answer("2500.0", "EUR", ""), `amountOfMoney.amount less its surcharge "2500"`},
		{"ours, written 1030.0 and 30.00", answer("1030.0", "EUR", `{"amount":30.00,"currencyCode":"EUR"}`), ""},
		{"ours, surcharged in another currency", answer("1000", "EUR", `{"amount":30,"currencyCode":"USD"}`), ""},
		{"another currency, surcharged in ours", answer("1030", "USD", `{"amount":30,"currencyCode":"EUR"}`),
			`amountOfMoney.currencyCode "USD", not the request's order.amountOfMoney.currencyCode "EUR"`},
		{"a fraction of a minor unit is no net amount", answer("1030.5", "EUR", `{"amount":30,"currencyCode":"EUR"}`), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := otherRequest([]byte(surcharged), []byte(tt.answer), nil)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("otherRequest() = %q; want %q", got, tt.want)
			}
		})
	}
}
