package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

// Card-issuing and banking-as-a-service APIs' documented answers to a
// key, each to a client with the default settings but for where the API
// wants its key. Each row is what idem does today and is safe: the same
// key and bytes on every send, no failure for what may have executed,
// and nothing settled from a body whose resource it cannot read.
func TestProviderCardIssuingAndBaaSShapes(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	for _, tt := range []providerShape{
		// https://www.marqeta.com/docs/core-api/idempotency: a Core API
		// POST is idempotent by the primary "token" in its body, and the
		// same call again with "identical content and primary token"
		// gets 201. The API spec answers a token held for another
		// payload 409 "Token already associated with a different payload"
		// (in Marqeta's {"error_message","error_code"} envelope,
		// marqeta.com/docs/core-api/errors; the code's number is ours).
		// To a first attempt that says this request differs: failed, the
		// key at fault. After a lost answer ours may be the one that
		// holds the token: for a person once it persists.
		{name: "marqeta 409 token with a different payload, key in the body", body: marqetaGPAOrder,
			shapes: []shape{{status: 409, body: marqetaTokenConflict}},
			state:  idem.StateFailed, kinds: []error{idem.ErrFailed, idem.ErrKeyConflict}, posts: 1},
		{name: "marqeta 409 token with a different payload after a lost response, key in the body", body: marqetaGPAOrder,
			shapes: []shape{lost, {status: 409, body: marqetaTokenConflict}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		// Marqeta's resources are named by "token", not "id": its 201
		// GPA order, "state" COMPLETION, proves nothing to DecodeJSON. Resent under the same
		// token, which Marqeta answers with the same order, until the
		// budget is spent: never settled, never failed, for a Decoder
		// that reads Marqeta's orders.
		{name: "marqeta gpa order after a lost response, key in the body", body: marqetaGPAOrder,
			shapes: []shape{lost, {status: 201, body: `{"token":"k","amount":100.00,"currency_code":"USD","state":"COMPLETION",` +
				`"user_token":"user_1","funding_source_token":"funding_1","transaction_token":"txn_1",` +
				`"response":{"code":"0000","memo":"Approved or completed successfully"}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.lithic.com/docs/idempotent-requests: the first
		// answer's status and body come again for the key. A payment
		// (lithic-go's Payment: "token", "result", "status" DECLINED,
		// PENDING, RETURNED or SETTLED) has no "id": a DECLINED one is
		// never read as failed, nor as made, without a Decoder.
		{name: "lithic payment declined, unread", header: "Idempotency-Key", body: `{"amount":100}`,
			shapes: []shape{{status: 201, body: `{"token":"b8c9d0e1-2f3a-4b5c-8d6e-7f8091a2b3c4","category":"ACH","currency":"USD",` +
				`"direction":"CREDIT","result":"DECLINED","status":"DECLINED","pending_amount":0,"settled_amount":0,` +
				`"events":[{"token":"c9d0e1f2-3a4b-4c5d-9e6f-8091a2b3c4d5","amount":100,"result":"DECLINED",` +
				`"type":"ACH_ORIGINATION_INITIATED","detailed_results":["FUNDS_INSUFFICIENT"]}],"user_defined_id":null}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.galileo-ft.com/pro/reference/idempotency: the
		// transactionId (a form field) is unique per successful call; the
		// same one again is status_code 24 "Duplicate transaction", in
		// Galileo's envelope (reference/response, reference/errors:
		// "errors" present with an error's code; its words, and the 200
		// it comes with here, are ours). After a lost answer ours is the call that succeeded: for
		// a person once it persists. To a first attempt, a copy of ours
		// may have: for a person at once, never failed.
		{name: "galileo 200 duplicate transaction after a lost response, key in a form", body: galileoAdjustment,
			shapes: []shape{lost, {status: 200, body: galileoDuplicate}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		{name: "galileo 200 duplicate transaction to a first attempt, key in a form", body: galileoAdjustment,
			shapes: []shape{{status: 200, body: galileoDuplicate}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},

		// https://docs.synctera.com/reference/need-to-know: a key whose
		// first request still runs is 409 IDEMPOTENCY_CONCURRENT_USE, a
		// key reused for another request IDEMPOTENCY_INVALID_REUSE, in
		// Synctera's RFC 7807 envelope with its "code" (synctera_ruby_sdk's
		// Error; the detail words are ours, and the reuse's 422 is the
		// IETF draft's, which Synctera follows). The 409 is waited for,
		// never failed; the reuse, which does not say the request
		// differs, to a first attempt is for a person, the key flagged.
		{name: "synctera 409 IDEMPOTENCY_CONCURRENT_USE after a lost response", header: "Idempotency-Key", body: `{"amount":100}`,
			shapes: []shape{lost, {status: 409, body: syncteraConcurrentUse}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "synctera 409 IDEMPOTENCY_CONCURRENT_USE to a first attempt", header: "Idempotency-Key", body: `{"amount":100}`,
			shapes: []shape{{status: 409, body: syncteraConcurrentUse}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "synctera 422 IDEMPOTENCY_INVALID_REUSE to a first attempt", header: "Idempotency-Key", body: `{"amount":100}`,
			shapes: []shape{{status: 422, body: `{"code":"IDEMPOTENCY_INVALID_REUSE","detail":"idempotency key was already used",` +
				`"status":422,"title":"Idempotency Invalid Reuse","type":"https://dev.synctera.com/errors/idempotency-invalid-reuse"}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},

		// https://column.com/docs/workingwithapi/idempotency: a
		// successful request's result is saved and returned for its
		// Idempotency-Key, unmarked: after a lost answer the resend's
		// transfer is ours, settled by its id.
		{name: "column ach transfer returned again after a lost response", header: "Idempotency-Key",
			body: `counterparty_id=cpty_1vX6b45fQ41k62xEXjjIHe5kiRM&bank_account_id=bacc_1vX9r5qaj6YDm7y4ohOujR0af1Q&type=CREDIT&amount=10000&currency_code=USD`,
			shapes: []shape{lost, {status: 200, body: `{"id":"acht_2Q1jlDDXQDkDeyhQDqR4pjkx95n","type":"CREDIT","status":"initiated",` +
				`"amount":10000,"currency_code":"USD","bank_account_id":"bacc_1vX9r5qaj6YDm7y4ohOujR0af1Q",` +
				`"counterparty_id":"cpty_1vX6b45fQ41k62xEXjjIHe5kiRM"}`}},
			state: idem.StateSucceeded, id: "acht_2Q1jlDDXQDkDeyhQDqR4pjkx95n", posts: 2},

		// https://docs.solidfi.com/v1/api-reference/getting-started/idempotency:
		// every answer is stored for the sd-idempotency-key, and a 409
		// EC_QLDB_OCC_ERROR_RETRY ("qldb occ error please retry") asks
		// for a new key (the members' names beside sysMessage are ours).
		// idem never makes a new key: the stored 409 comes again, read as
		// the key in flight, pending for Resume and, once the key window
		// passes, a person; never failed.
		{name: "solid 409 EC_QLDB_OCC_ERROR_RETRY", header: "Sd-Idempotency-Key", body: `{"amount":100}`,
			shapes: []shape{{status: 409, body: `{"sysCode":"EC_QLDB_OCC_ERROR_RETRY","sysMessage":"qldb occ error please retry"}`}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, "") })
	}
}

// A Marqeta GPA order (funds to a user's account), its key "k" in its
// primary token, and Marqeta's refusal of a token held for another
// payload; a Galileo Create Adjustment form, its key "k" in
// transactionId, and Galileo's answer to a transactionId it holds;
// Synctera's refusal of a key whose first request still runs.
const (
	marqetaGPAOrder      = `{"token":"k","user_token":"user_1","amount":100.00,"currency_code":"USD","funding_source_token":"funding_1"}`
	marqetaTokenConflict = `{"error_message":"Token already associated with a different payload","error_code":"409001"}`
	galileoAdjustment    = `apiLogin=AbC123-9999&apiTransKey=Xy7890&providerId=999&transactionId=k&accountNo=074103000101` +
		`&amount=1.00&type=F&debitCreditIndicator=C`
	syncteraConcurrentUse = `{"code":"IDEMPOTENCY_CONCURRENT_USE","detail":"a request with this idempotency key is still being processed",` +
		`"status":409,"title":"Idempotency Concurrent Use","type":"https://dev.synctera.com/errors/idempotency-concurrent-use"}`
	galileoDuplicate = `{"status_code":24,"status":"Duplicate transaction","system_timestamp":"2026-12-01 10:20:46",` +
		`"response_data":{},"processing_time":0.031,"echo":{"transaction_id":"k","provider_transaction_id":"","provider_timestamp":null},` +
		`"errors":["Duplicate transaction"]}`
)
