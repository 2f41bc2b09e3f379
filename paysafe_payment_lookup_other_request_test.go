package idem_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// decodeListed reads a lookup that answers its resource in a list of one
// under member (PayU's "orders", Paysafe's "payments"): the resource's id
// under idName, its status paid succeeded, one of refused failed, any
// other running.
func decodeListed(member, idName, paid string, refused ...string) idem.Decoder {
	return func(a *idem.Answer) (idem.Outcome, error) {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(a.Body, &top); err != nil {
			return idem.Outcome{}, err
		}
		var list []map[string]any
		if err := json.Unmarshal(top[member], &list); err != nil || len(list) != 1 {
			return idem.Outcome{}, errors.New("not one of " + member)
		}
		res := list[0]
		id, _ := res[idName].(string)
		status, _ := res["status"].(string)
		switch {
		case status == paid:
			return idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, nil
		case slices.Contains(refused, status):
			return idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: status}, nil
		}
		return idem.Outcome{State: idem.StateProcessing, ResourceID: id}, nil
	}
}

// Paysafe's Payments API (POST /paymenthub/v1/payments) keys a payment by
// the merchant's merchantRefNum, refused as a duplicate only when used
// "within the past 90 days" (dupCheck, docs.paysafe.com), and looks it up
// by it, GET /paymenthub/v1/payments?merchantRefNum=…, answering a list:
// {"payments": [{…}], "meta": {…}} ("Get Payments Using Merchant
// Reference Number"). A merchantRefNum taken from a business id and
// reused, or shared with another service, finds another payment. Like
// PayU's "orders", "payments" was no envelope otherRequest looked in: the
// other payment's 5000 USD COMPLETED settled our 1407 succeeded with its
// id, and ours, never made, was lost.
func TestPaysafeLookupByMerchantRefNumFindingAnotherPaymentIsNotOurs(t *testing.T) {
	const id = "3aeb9c63-6386-46a3-9f8e-f452e722228a"
	answer := func(amount string) string {
		return `{"payments":[{"id":"` + id + `","paymentType":"CARD","merchantRefNum":"payout-2026-0042","amount":` + amount +
			`,"currencyCode":"USD","status":"COMPLETED","settleWithAuth":true}],"meta":{"numberOfRecords":1,"limit":10,"page":1}}`
	}
	requireQueriedResults(t, answer, "5000", "1407", func(srv *httptest.Server, clock *idemtest.Clock) (*idem.Client, idem.Request) {
		c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(decodeListed("payments", "id", "COMPLETED", "FAILED", "CANCELLED")),
			idem.WithResultEndpoint(srv.URL+"/paymenthub/v1/payments?merchantRefNum={key}"))
		const body = `{"merchantRefNum":"payout-2026-0042","amount":1407,"currencyCode":"USD","dupCheck":true,"settleWithAuth":true,` +
			`"paymentHandleToken":"SC7nzOK9blfEKX1r"}`
		return c, idem.Request{Key: "payout-2026-0042", URL: srv.URL + "/paymenthub/v1/payments", Body: []byte(body)}
	}, id, `amount "5000", not the request's amount "1407"`)
}
