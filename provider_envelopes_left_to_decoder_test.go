package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Some APIs name their outcome in members of their own that no general
// rule reads safely, and DecodeJSON leaves them to a Decoder (README's
// Limits): what it must never do is read them as settled, nor let the
// "data" or "transactionStatus" rules read them. Each proves nothing,
// declined or approved, to a submit and to a result query.
//   - Nuvei's REST payment: "status" is the call's (SUCCESS, ERROR), the
//     payment's is "transactionStatus" (APPROVED, DECLINED, ERROR,
//     REDIRECT, PENDING) beside "transactionId" (the transaction as
//     raw.githubusercontent.com/api-evangelist/nuvei/refs/heads/main/json-schema/nuvei-transaction-schema.json
//     describes it).
//   - Worldpay's Access Payments API (2024-06-01): the outcome is
//     "outcome" (authorized, sentForSettlement, refused, 3dsChallenged…)
//     beside a "paymentId" of its own
//     (developer.worldpay.com/_spec/products/access/payments/@20240601/openapi.yaml,
//     docs.worldpay.com/access/products/payments/openapi/3ds-actions/supply3dsdevicedata).
//   - Plaid's /transfer/create and /transfer/get: the transfer under
//     "transfer" beside "request_id", "failed" when no funds moved
//     (TransferCreateResponse, pub.dev/documentation/dart_plaid/latest/generated_plaid_service.swagger/TransferCreateResponse/TransferCreateResponse.html;
//     TransferStatus, docs.rs/crate/plaid/latest/source/src/model/transfer_status.rs).
//   - Payoneer's v4 payouts: the payout under "result" beside "audit_id",
//     "code" and "description" (developer.payoneer.com, Payout status;
//     no copy of it was found to quote, the shape is its envelope's).
func TestProviderEnvelopesLeftToADecoder(t *testing.T) {
	for _, tt := range []struct {
		name, body string
	}{
		{"nuvei approved", `{"orderId":"39272","userTokenId":"230811147","transactionStatus":"APPROVED","gwErrorCode":0,"gwExtendedErrorCode":0,` +
			`"transactionType":"Sale","transactionId":"711000000009800484","authCode":"111413","sessionToken":"2da7c7d4-ef4e-4b4b-8e8f-1a8ba3e76c9c",` +
			`"clientUniqueId":"12345","internalRequestId":18469421,"status":"SUCCESS","errCode":0,"reason":"","merchantId":"479748173730597238",` +
			`"merchantSiteId":"180083","version":"1.0","clientRequestId":"k"}`},
		{"nuvei declined", `{"orderId":"39273","transactionStatus":"DECLINED","gwErrorCode":-1,"gwErrorReason":"Decline","transactionType":"Sale",` +
			`"transactionId":"711000000009800485","status":"SUCCESS","errCode":0,"reason":"","version":"1.0","clientRequestId":"k"}`},
		{"worldpay authorized", `{"outcome":"authorized","paymentId":"pay9qfW3LZ8DrPkZgQXuhKeN0","transactionReference":"Memory265-13/08/1876",` +
			`"schemeReference":"MCCOLXT1C0104","issuer":{"authorizationCode":"675725"},` +
			`"paymentInstrument":{"type":"card/plain","cardBin":"444433","lastFour":"1111","countryCode":"GB","expiryDate":{"year":2035,"month":5}}}`},
		{"worldpay refused", `{"outcome":"refused","paymentId":"pay9qfW3LZ8DrPkZgQXuhKeN1","transactionReference":"Memory265-13/08/1876",` +
			`"refusalDescription":"Refused","refusalCode":"5"}`},
		{"plaid transfer pending", `{"transfer":{"id":"460cbe92-2dcc-8eae-5ad6-b37d0ec90fd9","authorization_id":"c9f90aeb-1234-4f4c-8b3a-0c1b4a2e5d6f",` +
			`"ach_class":"ppd","account_id":"3gE5gnRzNyfXpBK5wEEKcymJ5albGVUqg77gr","type":"debit","amount":"12.34","description":"payment",` +
			`"created":"2020-08-06T17:27:15Z","status":"pending","network":"ach","failure_reason":null},"request_id":"saKrIBuEB9qJZno"}`},
		{"plaid transfer failed", `{"transfer":{"id":"460cbe92-2dcc-8eae-5ad6-b37d0ec90fd9","type":"debit","amount":"12.34","status":"failed",` +
			`"failure_reason":{"ach_return_code":null,"description":"the account is frozen"}},"request_id":"saKrIBuEB9qJZno"}`},
		{"payoneer payout transferred", `{"result":{"payout_id":"1187954","client_reference_id":"k","status":"Transferred",` +
			`"amount":100,"currency":"USD","payee_id":"payee-77"},"audit_id":46129113,"code":0,"description":"Success"}`},
		{"payoneer payout failed", `{"result":{"payout_id":"1187955","client_reference_id":"k","status":"Failed",` +
			`"amount":100,"currency":"USD","payee_id":"payee-77"},"audit_id":46129114,"code":0,"description":"Success"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, query := range []bool{false, true} {
				out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: http.StatusOK, Query: query, Body: []byte(tt.body)})
				require.Errorf(t, err, "query %v: read as %+v", query, out)
			}
		})
	}
}
