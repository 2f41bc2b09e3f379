package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Subscription billing APIs' documented answers, read right today: each
// row holds what idem does with them at the default settings but for
// where the API wants its key. Chargebee's replays and Zuora's 409 and
// 200 OK refusals are held in TestProviderIdempotencyShapes,
// TestChargebeeReplayAfterALostAnswer and
// TestZuoraStoredAnswerAfterLostResponse.
func TestSubscriptionBillingIdempotencyShapes(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	// https://apidocs.chargebee.com/docs/api/error-handling ("Sample
	// error response 2"): a subscription whose first charge the gateway
	// declined, 400 with type "payment".
	chargebeeDeclined := shape{status: http.StatusBadRequest, body: `{"message":"Subscription cannot be created as we are not able to collect ` +
		`EUR 10,00 from your card on file. Error message: (card_declined) Your card was declined.","type":"payment",` +
		`"api_error_code":"payment_processing_failed","error_cause_id":"gateway.general.decline"}`}
	// https://apidocs.chargebee.com/docs/api/error-handling ("Sample
	// error response 1"): 404 resource_not_found for an item price that
	// is not there.
	chargebeeNoPlan := shape{status: http.StatusNotFound, body: `{"message":"Plan is not present","type":"invalid_request",` +
		`"api_error_code":"resource_not_found","param":"item_id"}`}
	// Recurly v3's error envelope, {"error":{"type":…,"message":…,
	// "params":[…]}}, as recurly/recurly-client-go's error_test.go and
	// error_types.go read it: 422 "validation", 429 "rate_limited".
	recurlyInvalid := shape{status: http.StatusUnprocessableEntity, body: `{"error":{"type":"validation","message":"Plan code is invalid",` +
		`"params":[{"param":"plan_code","message":"is invalid"}]}}`}
	recurlyLimited := shape{status: http.StatusTooManyRequests, body: `{"error":{"type":"rate_limited","message":"Too many requests"}}`}
	const (
		chargebee = "Chargebee-Idempotency-Key"
		standard  = "Idempotency-Key" // Recurly's and Zuora's
	)
	for _, tt := range []providerShape{
		{name: "chargebee payment declined to a first attempt", header: chargebee, shapes: []shape{chargebeeDeclined},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 1},
		{name: "chargebee payment declined after a lost response", header: chargebee, shapes: []shape{lost, chargebeeDeclined},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		{name: "chargebee 404 resource_not_found to a first attempt", header: chargebee, shapes: []shape{chargebeeNoPlan},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 1},
		{name: "recurly 422 validation to a first attempt", header: standard, shapes: []shape{recurlyInvalid},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 1},
		{name: "recurly 422 validation after a lost response", header: standard, shapes: []shape{lost, recurlyInvalid},
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewRefusedAfterSend, posts: 4},
		{name: "recurly 429 rate_limited", header: standard, shapes: []shape{recurlyLimited},
			state: idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		// https://developer.zuora.com/docs/guides/idempotent-requests: 409
		// for the key's request still in progress, 422 for the key used
		// with another request (bodies not documented: left empty here).
		// Neither executed this request: the 409 is waited for and resent,
		// the 422 is failed, never resent.
		{name: "zuora 409 while the first is in progress, to a first attempt", header: standard, shapes: []shape{{status: http.StatusConflict}},
			state: idem.StatePending, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
		{name: "zuora 422 key used with another request, to a first attempt", header: standard, shapes: []shape{{status: http.StatusUnprocessableEntity}},
			state: idem.StateFailed, kinds: []error{idem.ErrFailed}, posts: 1},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, `{"plan_code":"gold","account":{"code":"acct-1"}}`) })
	}
}

// Maxio Advanced Billing (Chargify) refuses with {"errors":[…]}, a list
// of sentences (its SDK's ErrorListResponse and CustomerErrorResponse,
// errors: string[]: @maxio-com/advanced-billing-sdk,
// src/models/containers/customerErrorResponseErrors.ts). The failure's
// reason is the first of them, where it was only the status's text and
// the caller could not tell what to fix.
func TestMaxioErrorListReason(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusUnprocessableEntity,
		body: `{"errors":["Product must be specified","Credit card: cannot be expired."]}`})
	res, err := v.submit(t)
	requireOutcome(t, res, err, idem.StateFailed, []error{idem.ErrFailed}, "", "")
	require.Equal(t, "422: Product must be specified", res.Reason)
	v.requireKeys(t, "Idempotency-Key", "k", 1)
}
