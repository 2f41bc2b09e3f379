package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Buy-now-pay-later APIs' 409s, each to a client with the default
// settings but for where the API wants its key.
//
// Klarna Payments answers 409 BAD_VALUE to a create order (POST
// /payments/v1/authorizations/{authorizationToken}/order) whose values no
// longer match its authorization, or whose authorization already placed
// an order with another body, in its error envelope (error_code,
// error_messages, correlation_id):
// https://docs.klarna.com/resources/developer-tools/error-handling/error-codes-and-messages-for-klarna-payments/
// ("409 - BAD_VALUE": "Not matching fields..." and "The order has been
// already completed with different request body").
//
// Affirm answers 409 both to a capture whose Idempotency-Key is still
// being processed and to a capture it refuses for its amount
// (https://docs.affirm.com/developers/reference/errors, "Charges endpoint
// status codes", 409: "Charges on this instrument cannot be captured for
// an amount unequal to authorization hold amount.", "The transaction with
// this idempotency key is processing. Please wait to retry or use a
// different idempotency key."), the refusal's code one of its documented
// error codes (https://docs.affirm.com/developers/docs/development-error-codes:
// capture-unequal-instrument).
//
// Both refusals were read as the key in flight: resent to the end of the
// budget and by every Do, Resume and Run after it until the key window
// closed, never failed nor left for a person. No resend of the same
// bytes gets past them: failed to a first attempt (a copy of these bytes
// that executed would be answered its order or capture, under the key or
// the authorization), asked about and left for a person after a send
// that may have executed, the server's words the reason. Affirm's 409 of
// a key being processed stays in flight, and so does either refusal whose
// words say the order or capture still runs (d11ac35's guard).
func TestBNPLConflictRefusals(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	klarna := shape{status: http.StatusConflict, body: `{"error_code":"BAD_VALUE",` +
		`"error_messages":["The order has been already completed with different request body"],"correlation_id":"6a9b1cb1-73a3-4936-a030-481ba4bb203b"}`}
	affirm := shape{status: http.StatusConflict, body: `{"status_code":"409","type":"invalid_request","code":"capture-unequal-instrument",` +
		`"message":"Charges on this instrument cannot be captured for an amount unequal to authorization hold amount."}`}
	affirmProcessing := shape{status: http.StatusConflict, body: `{"status_code":"409","type":"invalid_request",` +
		`"message":"The transaction with this idempotency key is processing. Please wait to retry or use a different idempotency key."}`}
	// Modelled, no page quotes them: a refusal of the values whose words
	// say the order or capture still runs may be refusing for our own
	// copy (a mesh's retry of this very request), as Increase's
	// invalid_operation_error saying so may: never failed, waited for.
	klarnaRunning := shape{status: http.StatusConflict, body: `{"error_code":"BAD_VALUE",` +
		`"error_messages":["The order is still being processed"],"correlation_id":"6a9b1cb1-73a3-4936-a030-481ba4bb203b"}`}
	affirmRunning := shape{status: http.StatusConflict, body: `{"status_code":"409","type":"invalid_request","code":"capture-unequal-instrument",` +
		`"message":"The transaction with this idempotency key is being processed."}`}
	const (
		klarnaHeader = "Klarna-Idempotency-Key"
		klarnaURL    = "/payments/v1/authorizations/0b1d9815-165e-42e2-8867-35bc03789e00/order"
		klarnaOrder  = `{"purchase_country":"SE","purchase_currency":"SEK","locale":"sv-SE","order_amount":10000,"order_tax_amount":0}`
		affirmHeader = "Idempotency-Key"
		affirmURL    = "/api/v1/transactions/A1B2-C3D4/capture"
		affirmCap    = `{"order_id":"JKLM4321","amount":6100}`
	)
	for _, tt := range []struct {
		name              string
		header, url, body string
		shapes            []shape
		state             idem.State
		kinds             []error
		reason, review    string
		posts             int
	}{
		{"klarna order completed with another body, to a first attempt", klarnaHeader, klarnaURL, klarnaOrder, []shape{klarna},
			idem.StateFailed, []error{idem.ErrFailed}, "409: BAD_VALUE: The order has been already completed with different request body", "", 1},
		{"klarna order completed with another body, after a lost response", klarnaHeader, klarnaURL, klarnaOrder, []shape{lost, klarna},
			idem.StateUnknown, []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, "", idem.ReviewRefusedAfterSend, 4},
		{"affirm capture amount refused, to a first attempt", affirmHeader, affirmURL, affirmCap, []shape{affirm},
			idem.StateFailed, []error{idem.ErrFailed},
			"409: capture-unequal-instrument: Charges on this instrument cannot be captured for an amount unequal to authorization hold amount.", "", 1},
		{"affirm capture amount refused, after a lost response", affirmHeader, affirmURL, affirmCap, []shape{lost, affirm},
			idem.StateUnknown, []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, "", idem.ReviewRefusedAfterSend, 4},
		{"affirm key processing, to a first attempt", affirmHeader, affirmURL, affirmCap, []shape{affirmProcessing},
			idem.StatePending, []error{idem.ErrUnknownOutcome}, "", "", 5},
		{"affirm key processing, after a lost response", affirmHeader, affirmURL, affirmCap, []shape{lost, affirmProcessing},
			idem.StateProcessing, []error{idem.ErrUnknownOutcome}, "", "", 5},
		{"klarna BAD_VALUE saying the order still runs, to a first attempt", klarnaHeader, klarnaURL, klarnaOrder, []shape{klarnaRunning},
			idem.StatePending, []error{idem.ErrUnknownOutcome}, "", "", 5},
		{"affirm capture refusal saying the key's capture still runs, to a first attempt", affirmHeader, affirmURL, affirmCap, []shape{affirmRunning},
			idem.StatePending, []error{idem.ErrUnknownOutcome}, "", "", 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader(tt.header, idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + tt.url, Body: []byte(tt.body)})
			requireOutcome(t, res, err, tt.state, tt.kinds, "", tt.review)
			v.requireKeys(t, tt.header, "k", tt.posts)
			switch tt.state {
			case idem.StateFailed:
				require.Equal(t, tt.reason, res.Reason)
			case idem.StateUnknown:
				requireRefusedAfterSend(t, c, res, err, "k", "request")
			}
		})
	}
}

// Buy-now-pay-later APIs' documented answers read right today, each row
// what idem does with them at the default settings but for where the API
// wants its key.
func TestBNPLIdempotencyShapes(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	// https://afterpay-global-api.readme.io/reference/capture-payment and
	// .../reference/idempotent-requests: Afterpay's key is the requestId
	// in the body; a capture answers 201 with the Payment object; a retry
	// while the first still runs may get 409 ("repeat with the same
	// requestId until something other than a 409"); a full capture done
	// already is 410 payment_captured, in its error envelope (errorCode,
	// errorId, message, httpStatusCode). After a lost answer that 410 may
	// be about our own capture: never failed.
	const afterpayCapture = `{"requestId":"k","merchantReference":"merchantOrder-1234","amount":{"amount":"100.00","currency":"USD"}}`
	afterpayPayment := shape{status: http.StatusCreated, body: `{"id":"100101524","token":"002.m6d9jkrtv1p0j4jqk6dijl6d8o9d2ac2fd0ajas5kfs4u2e5",` +
		`"status":"APPROVED","paymentState":"CAPTURED","merchantReference":"merchantOrder-1234","refunds":[],` +
		`"events":[{"id":"1","type":"CAPTURED","amount":{"amount":"100.00","currency":"USD"}}]}`}
	afterpayCaptured := shape{status: http.StatusGone, body: `{"errorCode":"payment_captured","errorId":"a5c7f0e5e2b4c0a6",` +
		`"message":"Payment has already been fully captured for this order","httpStatusCode":410}`}
	// https://docs.klarna.com/api/escalation-and-retry-policy: the same
	// Klarna-Idempotency-Key on an Order Management capture gets the
	// first's answer again: 201, no body, the capture in Location and
	// Capture-Id.
	klarnaCapture := shape{status: http.StatusCreated, header: http.Header{
		"Location":   {"https://api.klarna.com/ordermanagement/v1/orders/f3392f8b-6116-4073-ab96-e330819e2c07/captures/4ba29b50-be7b-44f5-a492-113e6a865e22"},
		"Capture-Id": {"4ba29b50-be7b-44f5-a492-113e6a865e22"}}}
	for _, tt := range []providerShape{
		{name: "afterpay capture answered after a lost response, key in the body", body: afterpayCapture,
			shapes: []shape{lost, afterpayPayment}, state: idem.StateSucceeded, id: "100101524", posts: 2},
		{name: "afterpay 409 while the first runs, after a lost response, key in the body", body: afterpayCapture,
			shapes: []shape{lost, {status: http.StatusConflict}}, state: idem.StateProcessing, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "afterpay 410 payment_captured after a lost response, key in the body", body: afterpayCapture,
			shapes: []shape{lost, afterpayCaptured},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		{name: "klarna capture answered again after a lost response", header: "Klarna-Idempotency-Key",
			shapes: []shape{lost, klarnaCapture}, state: idem.StateSucceeded, id: "4ba29b50-be7b-44f5-a492-113e6a865e22", posts: 2},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, `{"captured_amount":10000}`) })
	}
}
