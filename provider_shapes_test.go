package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

// Payment APIs' documented answers, each read by a client with the
// default settings (but for the key's header where the API names its
// own). Each row is what idem does with the answer today, and is safe:
// no success or failure the answer does not prove, no other request's
// result taken for ours, no resend after the key's final answer. Rows
// that end unknown with no review are 2xx answers in an API's own shape,
// which idem cannot read without a Decoder; they stay open, never
// settled wrongly.
// Shapes for one idempotency behaviour of several APIs are in
// key_reuse_shapes_test.go and replay_markers_test.go.
func TestProviderShapes(t *testing.T) {
	const mangopayBlocked = `{"Message":"A resource has already been created with this Idempotency Key",` +
		`"Type":"idempotent_creation_conflict","Id":"bf6cce22-4c12-454f-ac05-ca20c8683735#1452723935","Date":1452723944,"errors":null}`
	const easypayPayment = `{"status":"ok","message":["Your request was successfully created"],"id":"c6056234-a3f9-42de-b944-3ed793fcb6bb",` +
		`"method":{"type":"mb","status":"waiting","entity":"21098","reference":"001002003"}}`
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	replayed := http.Header{"Idempotent-Replayed": {"true"}}
	for _, tt := range []struct {
		name   string
		shapes []shape
		opts   []idem.Option
		header string // the key's header; Idempotency-Key when empty
		state  idem.State
		kinds  []error // errors.Is must match each; nil: no error
		id     string  // the resource id settled
		review string
		posts  int
	}{
		// https://docs.stripe.com/idempotency: a stored answer, error or
		// not, replayed with Idempotent-Replayed: true. Ours: its amount
		// is the one submit sends.
		{name: "stripe replayed charge after a lost response",
			shapes: []shape{lost, {status: 200, header: replayed, body: `{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","object":"charge","amount":100,"paid":true,"status":"succeeded"}`}},
			state:  idem.StateSucceeded, id: "ch_3MmlLrLkdIwHu7ix0snN0B15", posts: 2},
		{name: "stripe replayed card decline after a lost response",
			shapes: []shape{lost, {status: 402, header: replayed, body: `{"error":{"type":"card_error","code":"card_declined","decline_code":"generic_decline",` +
				`"message":"Your card was declined.","charge":"ch_3MmlLrLkdIwHu7ix0snN0B15"}}`}},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 2},

		// https://docs.easypay.pt/docs/idempotency: the stored answer
		// returned again with Idempotency-Replay: true. A single payment
		// is created 201 with "status": "ok", its id and its method (the
		// SinglePayment response of easypay's OpenAPI). To a key nothing
		// of ours used, the payment is another request's.
		{name: "easypay replayed payment after a lost response",
			shapes: []shape{lost, {status: 201, header: http.Header{"Idempotency-Replay": {"true"}}, body: easypayPayment}},
			state:  idem.StateSucceeded, id: "c6056234-a3f9-42de-b944-3ed793fcb6bb", posts: 2},
		{name: "easypay replayed payment to a key nothing of ours used",
			shapes: []shape{{status: 201, header: http.Header{"Idempotency-Replay": {"true"}}, body: easypayPayment}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict}, review: idem.ReviewKeyInUse, posts: 1},

		// https://docs.adyen.com/development-resources/api-idempotency:
		// the first answer returned again, unmarked. Its payment result
		// ("resultCode", "pspReference", no "id") is Adyen's own shape:
		// WithDecoder (ExampleWithDecoder_adyen) reads it.
		{name: "adyen authorised",
			shapes: []shape{{status: 200, body: `{"pspReference":"993617895204576J","resultCode":"Authorised",` +
				`"amount":{"currency":"EUR","value":1000},"merchantReference":"order-1"}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "adyen refused",
			shapes: []shape{{status: 200, body: `{"pspReference":"V4HZ4RBFJGXXGN82","resultCode":"Refused",` +
				`"refusalReason":"Refused","refusalReasonCode":"2","merchantReference":"order-1"}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "adyen 422 validation error",
			shapes: []shape{{status: 422, body: `{"status":422,"errorCode":"101","message":"Invalid card number","errorType":"validation",` +
				`"pspReference":"8816178952380553"}`}},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 1},

		// https://developer.squareup.com/docs/build-basics/common-api-patterns/idempotency:
		// the payment comes wrapped ({"payment":{…}}), a shape of
		// Square's own; a decline is a 4xx.
		{name: "square payment",
			shapes: []shape{{status: 200, body: `{"payment":{"id":"R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY","status":"COMPLETED",` +
				`"amount_money":{"amount":100,"currency":"USD"},"source_type":"CARD"}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "square card declined",
			shapes: []shape{{status: 402, body: `{"errors":[{"code":"GENERIC_DECLINE","detail":"Authorization error: 'GENERIC_DECLINE'",` +
				`"category":"PAYMENT_METHOD_ERROR"}],"payment":{"id":"R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY","status":"FAILED"}}`}},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 1},

		// https://support.checkout.com/hc/en-us/articles/24570669653010:
		// concurrent requests with one Cko-Idempotency-Key get 409 (429
		// before): nothing of ours executed, so resent until the
		// first's answer comes, never failed.
		{name: "checkout.com 409 another request in progress",
			shapes: []shape{{status: 409, body: ``}},
			opts:   []idem.Option{idem.WithKeyHeader("Cko-Idempotency-Key", idem.KeyBare)}, header: "Cko-Idempotency-Key",
			state: idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "checkout.com 429 another request in progress, after a lost response",
			shapes: []shape{lost, {status: 429, body: ``}},
			opts:   []idem.Option{idem.WithKeyHeader("Cko-Idempotency-Key", idem.KeyBare)}, header: "Cko-Idempotency-Key",
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://razorpay.com/docs/api/x/payout-idempotency/make-request:
		// a payout needs its X-Payout-Idempotency; the refusal of one
		// without it is no key conflict (idem sent it: something in
		// between dropped it).
		{name: "razorpay 400 idempotency key missing",
			shapes: []shape{{status: 400, body: `{"error":{"code":"BAD_REQUEST_ERROR","description":"Idempotency key is missing. ` +
				`Include idempotency header and key in the request.","source":"business","step":null,"reason":"null","metadata":{},"field":"X-Payout-Idempotency"}}`}},
			opts: []idem.Option{idem.WithKeyHeader("X-Payout-Idempotency", idem.KeyBare)}, header: "X-Payout-Idempotency",
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 1},
		// https://razorpay.com/docs/api/payments/route/transfers/direct-transfers-idempotent-request:
		// "If we receive another request while the first one is in
		// process, we will send a 409 error code. You can retry."
		{name: "razorpay transfer 409 while the first is in process",
			shapes: []shape{{status: 409, body: ``}},
			opts:   []idem.Option{idem.WithKeyHeader("X-Transfer-Idempotency", idem.KeyBare)}, header: "X-Transfer-Idempotency",
			state: idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.mangopay.com/api-reference/overview/idempotency:
		// every request after the first with a key is blocked with 409,
		// whatever the first one's outcome, and its "Id" is the error's.
		// Not GoCardless's answer (which names the resource created): the
		// key in flight, never settled, never the error's id for ours.
		{name: "mangopay 409 idempotent_creation_conflict, after a lost response",
			shapes: []shape{lost, {status: 409, body: mangopayBlocked}},
			state:  idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "mangopay 409 idempotent_creation_conflict to a key nothing of ours used",
			shapes: []shape{{status: 409, body: mangopayBlocked}},
			state:  idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://developer.paypal.com/braintree/in-person/guides/graphql-error-handling:
		// every answer is 200, an error in "errors"; a success comes
		// nested in "data".
		{name: "braintree graphql error in a 200",
			shapes: []shape{{status: 200, body: `{"data":{"chargeCreditCard":null},"errors":[{"message":"Credit card number is invalid.",` +
				`"extensions":{"legacyCode":"81715"}}],"extensions":{"requestId":"a-uuid-for-the-request"}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "braintree graphql charge",
			shapes: []shape{{status: 200, body: `{"data":{"chargeCreditCard":{"transaction":{"id":"dHJhbnNhY3Rpb25fa2g4OWZ0eXI",` +
				`"status":"SUBMITTED_FOR_SETTLEMENT"}}},"extensions":{"requestId":"a-uuid-for-the-request"}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://developers.paymob.com (the Pay API's transaction): a
		// declined or pending card payment comes 200 with its integer
		// "id", "success": false and "pending"; a decline's reason sits
		// in "data". Not a success: it stays open for a Decoder.
		{name: "paymob declined transaction",
			shapes: []shape{{status: 200, body: `{"id":192036465,"pending":false,"amount_cents":10000,"success":false,"is_auth":false,` +
				`"is_capture":false,"is_voided":false,"is_refunded":false,"currency":"EGP","order":{"id":217503754},` +
				`"data":{"message":"Do not honour","txn_response_code":"05"}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "paymob pending transaction",
			shapes: []shape{{status: 200, body: `{"id":192036466,"pending":true,"amount_cents":10000,"success":false,"currency":"EGP"}`}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://developers.fireblocks.com/changelog/announcement-change-in-idempotency-key-header-from-error-500-to-400-1:
		// after a 500 the key is refused with 400: ours may have
		// executed, so never failed, and a person is asked once the
		// refusal repeats.
		{name: "fireblocks 400 after an internal error",
			shapes: []shape{{status: 500, body: `{"message":"Internal server error"}`},
				{status: 400, body: `{"message":"This operation doesn't support the usage of the same idempotency key after an internal error"}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, review: idem.ReviewRefusedAfterSend, posts: 4},

		// https://raw.githubusercontent.com/api-evangelist/primer/refs/heads/main/examples/primer-post-payments-response-400-idempotencyerror.json:
		// a 400 naming the payment the key already made, to any request
		// after the key's was processed (primer.io/docs/api/introduction/idempotency-key):
		// the key's final word, as GoCardless's 409. To a key nothing of
		// ours used, a request's that may be ours (a mesh's retry): for a
		// person, its payment never taken for ours; after a lost
		// response, ours. key_already_exists_answer_test.go has the 409.
		{name: "primer 400 TransactionRequestIdempotencyKeyAlreadyExists",
			shapes: []shape{{status: 400, body: `{"error":{"errorId":"TransactionRequestIdempotencyKeyAlreadyExists",` +
				`"description":"Transaction request already exists with idempotency key 'k'.","paymentId":"6gHJtooK6","paymentStatus":"SETTLED",` +
				`"diagnosticsId":"1234567898","validationErrors":[]}}`}},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrKeyConflict}, review: idem.ReviewKeyInUse, posts: 1},
		{name: "primer 400 TransactionRequestIdempotencyKeyAlreadyExists after a lost response",
			shapes: []shape{lost, {status: 400, body: `{"error":{"errorId":"TransactionRequestIdempotencyKeyAlreadyExists",` +
				`"description":"Transaction request already exists with idempotency key 'k'.","paymentId":"6gHJtooK6","paymentStatus":"SETTLED",` +
				`"diagnosticsId":"1234567898","validationErrors":[]}}`}},
			state: idem.StateSucceeded, id: "6gHJtooK6", posts: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			res, err := v.submit(t, tt.opts...)
			requireOutcome(t, res, err, tt.state, tt.kinds, tt.id, tt.review)
			header := tt.header
			if header == "" {
				header = "Idempotency-Key"
			}
			v.requireKeys(t, header, "k", tt.posts)
		})
	}
}
