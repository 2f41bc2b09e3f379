package idem_test

import (
	"encoding/json"
	"fmt"

	"github.com/idemkit/idem"
)

// worldlinePayoutStore is Worldline Direct's CreatePayout, one of the
// methods its keys hold (docs.direct.worldline-solutions.com, Idempotent
// requests: "CreatePayout"), replayed for a key whose request completed
// "even with different payloads", marked X-GCS-Idempotence-Request-
// Timestamp. Its request is {"amountOfMoney": {"amount", "currencyCode"},
// "cardPayoutMethodSpecificInput": {…}, "references":
// {"merchantReference"}} (the SDKs' CreatePayoutRequest), its answer the
// payout with what it is under "payoutOutput": {"id", "payoutOutput":
// {"amountOfMoney", "references": {"merchantReference"}, …}, "status",
// "statusOutput"} (PayoutResponse, PayoutOutput).
func worldlinePayoutStore(cutBefore, cutAfter int, stored map[string]string) *keyReplayingServer {
	return worldlineReplaying(cutBefore, cutAfter, stored, func(b []byte, n int) string {
		var req worldlineAmount
		_ = json.Unmarshal(b, &req)
		return worldlinePayout(fmt.Sprintf("%d_0", 4066019730+n), req.AmountOfMoney.Amount, req.AmountOfMoney.CurrencyCode,
			req.References.MerchantReference)
	})
}

// worldlinePayout is a CreatePayout answer for a payout of amount (minor
// units) in currency, requested of the card's issuer.
func worldlinePayout(id string, amount int64, currency, reference string) string {
	return fmt.Sprintf(`{"id":%q,"payoutOutput":{"amountOfMoney":{"amount":%d,"currencyCode":%q},`+
		`"references":{"merchantReference":%q},"payoutReason":"refund","transactionDate":"2026-12-07T07:00:00.000+01:00"},`+
		`"status":"PAYOUT_REQUESTED","statusOutput":{"statusCategory":"PENDING_CONNECT_OR_3RD_PARTY","statusCode":50,"isCancellable":true}}`,
		id, amount, currency, reference)
}

// decodeWorldlinePayout reads a CreatePayout answer: its id and status.
func decodeWorldlinePayout(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.ID == "" {
		return idem.Outcome{}, fmt.Errorf("not a Worldline payout")
	}
	switch v.Status {
	case "PAYOUT_REQUESTED", "ACCOUNT_CREDITED":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.ID}, nil
	case "REJECTED", "REJECTED_CREDIT", "CANCELLED":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.ID, Reason: v.Status}, nil
	}
	return idem.Outcome{State: idem.StateProcessing, ResourceID: v.ID}, nil
}

// worldlinePayoutRequest is a CreatePayout of 1000 EUR to a card, its
// merchant's reference payout-1001.
const worldlinePayoutRequest = `{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"},` +
	`"cardPayoutMethodSpecificInput":{"paymentProductId":1,"token":"0ca037cc-9cb0-4a9f-8c3b-6c9e5d1e2f30","payoutReason":"refund"},` +
	`"references":{"merchantReference":"payout-1001"}}`
