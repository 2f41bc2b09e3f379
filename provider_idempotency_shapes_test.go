package idem_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// More payment APIs' documented idempotency answers, each to a client
// with the default settings but for where the API wants its key: the
// first create's answer replayed after a lost response, the same key in
// flight, the key used with another body. Each row is what idem does
// today and is safe: one request's worth of side effects, the same key
// and bytes on every send, no failure for what may have executed, and no
// other request's result taken for ours.
func TestProviderIdempotencyShapes(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	const razorpayPayout = `{"id":"pout_00000000000001","entity":"payout","fund_account_id":"fa_00000000000001","amount":1000000,` +
		`"currency":"INR","fees":590,"tax":90,"status":"processing","purpose":"refund","utr":null,"mode":"IMPS",` +
		`"reference_id":"Acme Transaction ID 12345","narration":"Acme Corp Fund Transfer","failure_reason":null}`
	const payment = `{"amount":100}`
	for _, tt := range []providerShape{
		// https://increase.com/documentation/idempotency-keys: the same
		// request again gets "the object created during the first
		// request" and Idempotent-Replayed: true; its objects echo the
		// key in idempotency_key.
		{name: "increase replayed transfer after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 200, header: http.Header{"Idempotent-Replayed": {"true"}},
				body: `{"id":"ach_transfer_uoxatyh3lt5evrsdvo7q","type":"ach_transfer","amount":100,"currency":"USD",` +
					`"status":"pending_approval","idempotency_key":"k"}`}},
			state: idem.StateSucceeded, id: "ach_transfer_uoxatyh3lt5evrsdvo7q", posts: 2},

		// https://razorpay.com/docs/api/x/payout-idempotency/: "If a
		// duplicate request is found with the same idempotency key, we
		// return the latest state of the payout entity", unmarked; a
		// payout still "processing" was created. "A different payload
		// will be rejected as a BAD_REQUEST", in Razorpay's error
		// envelope (razorpay.com/docs/errors), its description as
		// integrations match it (frappe's razorpayx integration).
		{name: "razorpay payout returned again after a lost response", header: "X-Payout-Idempotency",
			shapes: []shape{lost, {status: 200, body: razorpayPayout}},
			state:  idem.StateSucceeded, id: "pout_00000000000001", posts: 2},
		{name: "razorpay 400 different request body", header: "X-Payout-Idempotency",
			shapes: []shape{{status: 400, body: `{"error":{"code":"BAD_REQUEST_ERROR",` +
				`"description":"Different request body sent for the same Idempotency Header","source":"NA","step":"NA","reason":"NA","metadata":{}}}`}},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed, idem.ErrKeyConflict}, posts: 1},

		// https://developers.dwolla.com/docs/api-reference/api-fundamentals/idempotency-key:
		// the same key again gets "a 201 Created, with the original
		// response of the created resource" (a transfer's is its
		// Location, no body), and 409 while the first is still running;
		// after a 500 the key stays locked, answered 409 for 24 hours
		// (status.dwolla.com/incidents/bkl5393wxlhf).
		{name: "dwolla 201 Location again after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 201, header: http.Header{"Location": {"https://api.dwolla.com/transfers/d76265cd-0951-e511-80da-0aa34a9b2388"}}}},
			state:  idem.StateSucceeded, id: "d76265cd-0951-e511-80da-0aa34a9b2388", posts: 2},
		{name: "dwolla 409 while the first is processing, after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 409, body: ``}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "dwolla 500 then the key locked", header: "Idempotency-Key",
			shapes: []shape{{status: 500, body: `{"code":"ServerError","message":"A server error occurred. Error ID: 6188070b-8a3c-4f0e-9a3e-1f2a3b4c5d6e."}`},
				{status: 409, body: ``}},
			state: idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.moderntreasury.com/reference/idempotent-requests:
		// the original response echoed back, unmarked; 409 while the key
		// is being stored.
		{name: "modern treasury payment order echoed after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 201, body: `{"id":"6c6d5f2a-7c1e-4d1a-9b6e-2f6f0a1b2c3d","object":"payment_order",` +
				`"type":"ach","amount":100,"direction":"credit","currency":"USD","status":"approved"}`}},
			state: idem.StateSucceeded, id: "6c6d5f2a-7c1e-4d1a-9b6e-2f6f0a1b2c3d", posts: 2},
		{name: "modern treasury 409 while the key is being stored", header: "Idempotency-Key",
			shapes: []shape{{status: 409, body: ``}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.lithic.com/docs/idempotent-requests: the first
		// request's status and body come again, "even if those results
		// are 500 errors": a stored 500, unmarked, may have executed.
		{name: "lithic stored 500", header: "Idempotency-Key",
			shapes: []shape{{status: 500, body: `{"debugging_request_id":"req_1","message":"Internal server error"}`}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.rapyd.net/en/idempotency.html: the header is named
		// idempotency, and the first request's response comes again. Its
		// envelope ({"status":{…},"data":{…}}) is Rapyd's own: open for
		// a Decoder, never settled by the envelope's "SUCCESS".
		{name: "rapyd payment returned again", header: "Idempotency",
			shapes: []shape{{status: 200, body: `{"status":{"error_code":"","status":"SUCCESS","message":"","response_code":"",` +
				`"operation_id":"0fb6a1a4-6a42-4c36-9e4b-12f5d9c6a1b2"},"data":{"id":"payment_5ec2b3e9a0f2a2c9d1b3c4d5","amount":100,` +
				`"currency_code":"USD","status":"CLO","paid":true}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://github.com/OpenBankingUK/read-write-api-docs-pub/blob/master/docs/v3.1.10/profiles/read-write-data-api-profile.md#idempotency:
		// the same x-idempotency-key within 24 hours gets 201 with "the
		// current status of the resource", in the standard's own
		// envelope ({"Data":{…},"Links":…}): open for a Decoder that
		// reads Data.Status, never settled without one.
		{name: "open banking uk 201 domestic payment", header: "X-Idempotency-Key",
			shapes: []shape{{status: 201, body: `{"Data":{"DomesticPaymentId":"58923-001","ConsentId":"58923",` +
				`"Status":"AcceptedSettlementInProcess","CreationDateTime":"2026-11-29T12:00:00+00:00",` +
				`"StatusUpdateDateTime":"2026-11-29T12:00:00+00:00"},"Links":{"Self":"https://api.alphabank.com/open-banking/v3.1/pisp/domestic-payments/58923-001"},` +
				`"Meta":{}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		// A consent authorises one payment, and an ASPSP refuses a
		// consent not Authorised 400 UK.OBIE.Resource.InvalidConsentStatus
		// (OpenBankingUK/read-write-api-docs-pub, the payment specs; its
		// envelope as Barclays answers it, Tink's UK Open Banking agent
		// tests): a resend the key store no longer replays finds the
		// consent Consumed by the payment whose answer was lost. For a
		// person once the refusals persist, never failed.
		{name: "open banking uk 400 InvalidConsentStatus after a lost response", header: "X-Idempotency-Key",
			shapes: []shape{lost, {status: 400, body: `{"Code":"400 Bad Request","Id":"2c7cb790-a388-43c3-9062-4a24fd478ef8",` +
				`"Message":"Consent validation failed. ","Errors":[{"ErrorCode":"UK.OBIE.Resource.InvalidConsentStatus",` +
				`"Message":"The requested Consent ID doesn't exist or do not have valid status. "}]}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},

		// https://clearbank.github.io/docs/api/getting-started: X-Request-Id
		// "is what we use for idempotency", unique for 24 hours, and "If
		// ClearBank detects a duplicate, a 409: Conflict" (never the first
		// answer again); a 5xx "may, in exceptional circumstances, result in
		// being processed regardless", to be retried with the same id. Read
		// as the key in flight, never failed: after a lost answer it stays
		// processing; to a first attempt (a mesh's copy may have made the
		// payment) it stays pending, for Resume and, once the key window
		// passes, a person.
		{name: "clearbank 409 duplicate after a lost response", header: "X-Request-Id",
			shapes: []shape{lost, {status: 409, body: ``}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "clearbank 409 duplicate to a first attempt", header: "X-Request-Id",
			shapes: []shape{{status: 409, body: ``}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.truelayer.com/docs/error-types: RFC 7807 problems,
		// 409 "Idempotency-Key Concurrency Conflict" while another
		// request with the key is in progress, 422 "Idempotency-Key
		// Reuse" for another payload. Neither "Concurrency" nor
		// "Conflict" says the request differs, nor does "Reuse": to a
		// first attempt it may answer a copy of ours that went first (a
		// mesh's retry), flagged ReviewKeyInUse, never failed.
		{name: "truelayer 409 idempotency-key concurrency conflict", header: "Idempotency-Key",
			shapes: []shape{{status: 409, body: `{"type":"https://docs.truelayer.com/docs/error-types#idempotency-key-concurrency-conflict",` +
				`"title":"Idempotency-Key Concurrency Conflict","status":409,"trace_id":"5ef8bd3ba3c5b1f8a3e5f4e2b1c0d9e8"}`}},
			state: idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "truelayer 422 idempotency-key reuse", header: "Idempotency-Key",
			shapes: []shape{{status: 422, body: `{"type":"https://docs.truelayer.com/docs/error-types#idempotency-key-reuse",` +
				`"title":"Idempotency-Key Reuse","status":422,"trace_id":"5ef8bd3ba3c5b1f8a3e5f4e2b1c0d9e8"}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},

		// https://docs.purse.tech/docs/integrate/purse-api/best-practices:
		// an operation already processed answers its key with 409
		// "Idempotency violation" and the resource_id: never failed, and
		// not settled either (Increase's 409 names a resource_id for a
		// key used with another body).
		{name: "purse 409 idempotency violation, after a lost response", header: "X-Idempotency-Key",
			shapes: []shape{lost, {status: 409, body: `{"type":"urn:eu.purse:write-conflict","title":"Idempotency violation","status":409,` +
				`"instance":"/v2/payments/558f47c6-fd88-4c28-aa2f-5d3d7a44709f/captures","resource_id":"432ccde8-13e8-4c31-a900-a9c40546c12a"}`}},
			state: idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://developer.squareup.com/docs/build-basics/common-api-patterns/idempotency:
		// the key goes in the body's idempotency_key; the same key with
		// other data is IDEMPOTENCY_KEY_REUSED.
		{name: "square 400 IDEMPOTENCY_KEY_REUSED, key in the body",
			body: `{"idempotency_key":"k","amount_money":{"amount":100,"currency":"USD"},"source_id":"cnon:card-nonce-ok"}`,
			shapes: []shape{{status: 400, body: `{"errors":[{"category":"INVALID_REQUEST_ERROR","code":"IDEMPOTENCY_KEY_REUSED",` +
				`"detail":"The idempotency key can only be retried with the same request data."}]}`}},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed, idem.ErrKeyConflict}, posts: 1},

		// https://docs.wise.com/guides/product/send-money/standard-api-transfers:
		// customerTransactionId in the body is the key; a retry with it
		// is "a repeat message", answered with the transfer made.
		{name: "wise transfer after a lost response, key in the body",
			body: `{"targetAccount":13967081,"quoteUuid":"1d6e0a2b-5b56-4c9c-9f06-3c2d5c1e5f2a","customerTransactionId":"k","details":{"reference":"order-1"}}`,
			shapes: []shape{lost, {status: 200, body: `{"id":16521632,"targetAccount":13967081,"status":"incoming_payment_waiting",` +
				`"sourceCurrency":"EUR","sourceValue":100,"targetCurrency":"GBP","customerTransactionId":"k"}`}},
			state: idem.StateSucceeded, id: "16521632", posts: 2},

		// Currencycloud's payments/create takes the key as a form field,
		// unique_request_id, and refuses one it holds 400 with error_code
		// payment_create_failed and a duplicate_request reason ("The
		// unique_request_id provided for this payment has already been
		// used, please provide a new unique_request_id"; its API spec,
		// CurrencyCloud/currencycloud-swagger src/reference.yaml), never
		// its first answer again. After a lost answer: for a person once
		// the refusals persist; to a first attempt, which a copy may have
		// beaten (a mesh's retry): for a person at once.
		{name: "currencycloud 400 duplicate_request after a lost response, key in a form", body: currencycloudPayment,
			shapes: []shape{lost, {status: 400, body: currencycloudDuplicate}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		{name: "currencycloud 400 duplicate_request to a first attempt, key in a form", body: currencycloudPayment,
			shapes: []shape{{status: 400, body: currencycloudDuplicate}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},

		// https://eu.developers.trustly.com/doc-old/docs/error-messages:
		// every answer 200 OK, a refusal a JSON-RPC 1.1 error member; a
		// MessageID (the key, in params.Data) it holds is 637
		// ERROR_DUPLICATE_MESSAGE_ID. After a lost answer: for a person
		// once the refusals persist, never failed; to a first attempt, for
		// a person at once.
		{name: "trustly 200 ERROR_DUPLICATE_MESSAGE_ID after a lost response, key in the body", body: strings.Replace(trustlyPayout, "payout-7f3c9a", "k", 1),
			shapes: []shape{lost, {status: 200, body: trustlyDuplicateMessageID}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		{name: "trustly 200 ERROR_DUPLICATE_MESSAGE_ID to a first attempt, key in the body", body: strings.Replace(trustlyPayout, "payout-7f3c9a", "k", 1),
			shapes: []shape{{status: 200, body: trustlyDuplicateMessageID}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},

		// https://apidocs.chargebee.com/docs/api/idempotency: a key it
		// holds (chargebee-idempotency-key) gets "the response for that
		// record" with chargebee-idempotency-replayed: true. Its answer
		// wraps the subscription made (chargebee-node's
		// Subscription.CreateWithItemsResponse). To a first attempt it is
		// some other request's under the key (or a mesh's copy of ours):
		// for a person, never taken as ours. After a lost answer:
		// TestChargebeeReplayAfterALostAnswer.
		{name: "chargebee replayed subscription to a first attempt", header: "Chargebee-Idempotency-Key",
			shapes: []shape{{status: 200, header: chargebeeReplayed, body: chargebeeSubscription}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},

		// https://docs.withorb.com/reference/idempotency: Orb answers 409
		// "resource conflict" to a key whose first request has not
		// completed and to a key used with another payload, in its RFC
		// 7807 envelope (docs.withorb.com/reference/error-responses, type
		// #409-resource-conflict); its replay is marked
		// Idempotent-Replayed: true. Neither 409 is failed: after a lost
		// answer it is the first still running; to a first attempt it may
		// answer a mesh's copy.
		{name: "orb 409 resource conflict after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 409, body: orbConflict}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "orb 409 resource conflict to a first attempt", header: "Idempotency-Key",
			shapes: []shape{{status: 409, body: orbConflict}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://developer.zuora.com/docs/guides/idempotent-requests: the
		// first request's status, headers and body are stored "regardless
		// of whether it succeeded or failed"; 409 while it is still in
		// progress (its body not documented: left empty here).
		{name: "zuora 409 while the first is in progress, after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 409, body: ``}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.tosspayments.com/reference/using-api/authorization
		// (멱등키 헤더, 에러 처리하기): the same request again while the first
		// is being processed gets 409 IDEMPOTENT_REQUEST_PROCESSING, "이전
		// 멱등 요청이 처리중입니다." (the previous idempotent request is being
		// processed), and "send it again to see its answer". Toss's error
		// body is {"code", "message"}. After a lost answer it is ours,
		// still running; to a first attempt, another copy's: resent, never
		// failed.
		{name: "toss 409 IDEMPOTENT_REQUEST_PROCESSING after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 409, body: tossProcessing}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "toss 409 IDEMPOTENT_REQUEST_PROCESSING to a first attempt", header: "Idempotency-Key",
			shapes: []shape{{status: 409, body: tossProcessing}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://developers.paymongo.com/docs/money-movement-best-practices:
		// "If you send a second request while the first is still being
		// processed, you'll receive 409 idempotency_in_progress. Back off
		// and retry with the same key." PayMongo's errors come as
		// {"errors":[{"code","detail"}]}; this one's detail is not
		// documented, and the words here are ours.
		{name: "paymongo 409 idempotency_in_progress after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 409, body: paymongoInProgress}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "paymongo 409 idempotency_in_progress to a first attempt", header: "Idempotency-Key",
			shapes: []shape{{status: 409, body: paymongoInProgress}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// Toss's confirm of a payment it has already confirmed is 400
		// ALREADY_PROCESSED_PAYMENT, "이미 처리된 결제 입니다."
		// (docs.tosspayments.com/reference/error-codes, 결제 승인): after a
		// lost answer, the resend's key no longer replayed (its store is
		// 15 days), it refuses this copy for what the first did. For a
		// person once it persists, never failed.
		{name: "toss 400 ALREADY_PROCESSED_PAYMENT after a lost response", header: "Idempotency-Key",
			shapes: []shape{lost, {status: 400, body: tossAlreadyProcessed}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},

		// Paystack has no idempotency header: a transaction's reference,
		// in the body, is unique (paystack.com/docs/api/transaction), and
		// a second initialize or charge with it is refused 400
		// {"status":false,"message":"Duplicate Transaction Reference"}
		// (the answer Paystack integrations map to a duplicate reference;
		// its docs give no error bodies). After a lost answer the first
		// may have charged: never failed. To a first attempt, a copy of
		// ours may have: for a person.
		{name: "paystack 400 duplicate reference after a lost response, key in the body", body: paystackCharge,
			shapes: []shape{lost, {status: 400, body: paystackDuplicate}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		{name: "paystack 400 duplicate reference to a first attempt, key in the body", body: paystackCharge,
			shapes: []shape{{status: 400, body: paystackDuplicate}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, payment) })
	}
}

// providerShape is an API's documented answers (shapes, in turn) to a
// submit of key "k" at the default settings but for where the API wants
// its key, and what idem must make of them.
type providerShape struct {
	name   string
	shapes []shape
	header string // the key's header; "" with the key in the body
	body   string // the request's body; check's body when empty
	state  idem.State
	kinds  []error // errors.Is must match each; nil: no error
	id     string
	review string
	posts  int // sends, each with the key and the same bytes
}

// check submits tt's request, its body or else body, and asserts the
// outcome and that every send carried the key.
func (tt providerShape) check(t *testing.T, body string) {
	t.Helper()
	v := newVendor(t, tt.shapes...)
	opts := []idem.Option{idem.WithKeyInBody()}
	if tt.header != "" {
		opts = []idem.Option{idem.WithKeyHeader(tt.header, idem.KeyBare)}
	}
	if tt.body != "" {
		body = tt.body
	}
	c := clientFor(t, v.srv, idemtest.NewClock(epoch), opts...)
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(body)})
	requireOutcome(t, res, err, tt.state, tt.kinds, tt.id, tt.review)
	if tt.header != "" {
		v.requireKeys(t, tt.header, "k", tt.posts)
	} else {
		v.requireBodies(t, body, tt.posts)
	}
}

// currencycloudPayment is a Currencycloud payments/create form, its key
// "k" in unique_request_id; currencycloudDuplicate its refusal of a key it
// holds (the API spec's CreatePaymentError, reason duplicate_request).
const (
	currencycloudPayment = `currency=EUR&beneficiary_id=7a0a9d9d-2d1c-4b1a-9f0e-1d2c3b4a5f6e&amount=100.00&reason=Invoice&reference=INV-1` +
		`&unique_request_id=k`
	currencycloudDuplicate = `{"error_code":"payment_create_failed","error_messages":{"duplicate_request":[{"code":"duplicate_request",` +
		`"message":"The unique_request_id provided for this payment has already been used, please provide a new unique_request_id to ` +
		`successfully submit this payment","params":{}}]}}`
	// trustlyDuplicateMessageID is Trustly's refusal of a MessageID it
	// holds, 200 OK.
	trustlyDuplicateMessageID = `{"version":"1.1","error":{"name":"JSONRPCError","code":637,"message":"ERROR_DUPLICATE_MESSAGE_ID",` +
		`"error":{"signature":"c2ln","uuid":"258a2184-2842-b485-25ca-293525152425","method":"AccountPayout",` +
		`"data":{"code":637,"message":"ERROR_DUPLICATE_MESSAGE_ID"}}}}`
	// chargebeeSubscription is Chargebee's answer to a subscription
	// created with items, trimmed; chargebeeReplayed marks its replay.
	chargebeeSubscription = `{"subscription":{"id":"AzZlGJSpZ0e3b1","customer_id":"AzZlGJSpZ0e3b1","status":"active",` +
		`"currency_code":"USD","object":"subscription"},"customer":{"id":"AzZlGJSpZ0e3b1","object":"customer"},` +
		`"invoice":{"id":"inv_1001","status":"paid","total":10000,"object":"invoice"}}`
	// orbConflict is Orb's 409 resource conflict, its documented members.
	orbConflict = `{"status":409,"title":"Resource conflict",` +
		`"type":"https://docs.withorb.com/reference/error-responses#409-resource-conflict"}`
	// Toss Payments' and PayMongo's refusals of a key in flight, Toss's
	// of a payment it has confirmed, and Paystack's of a reference it holds
	// with the charge it is unique to.
	tossProcessing       = `{"code":"IDEMPOTENT_REQUEST_PROCESSING","message":"이전 멱등 요청이 처리중입니다."}`
	tossAlreadyProcessed = `{"code":"ALREADY_PROCESSED_PAYMENT","message":"이미 처리된 결제 입니다."}`
	paymongoInProgress   = `{"errors":[{"code":"idempotency_in_progress","detail":"A request with this idempotency key is still being processed."}]}`
	paystackCharge       = `{"email":"customer@email.com","amount":"20000","reference":"k"}`
	paystackDuplicate    = `{"status":false,"message":"Duplicate Transaction Reference"}`
)

var chargebeeReplayed = http.Header{"Chargebee-Idempotency-Replayed": {"true"}}
