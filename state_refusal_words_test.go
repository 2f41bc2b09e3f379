package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A first attempt refused for the state of what it acts on is a plain
// refusal: nothing of it ran, and no copy of it brought that state about.
// idem read two such 400s, with the key in a header, as a duplicate of
// the request (its words "already processed" and "already registered",
// about a payment and a token): left for a person as another request's
// key, where the request had simply failed.
//   - "Cannot cancel a payment that has already been processed.": a
//     cancel refused because the payment settled (Zuora: "After a payment
//     has been settled, it can no longer be canceled",
//     https://docs.zuora.com/zuora-payments/process-payments/create-a-payment-using-zuora-ui/manage-unapplied-payments/management-of-unapplied-payments/cancel-payments);
//     a copy of the cancel would have left it cancelled, not processed.
//   - "Device token is already registered": a device's push token, which
//     no payment is made under (Looker's POST /mobile/device refuses one
//     it holds, https://cloud.google.com/looker/docs/reference/looker-api/latest/methods/Auth/register_mobile_device,
//     in its {"message","documentation_url"} error).
//
// The exact words are the last session's report's; no page in the
// stored corpus quotes them for a named provider.
func TestStateRefusalToAFirstAttemptIsAFailure(t *testing.T) {
	for _, body := range []string{
		`{"error":{"type":"invalid_request_error","message":"Cannot cancel a payment that has already been processed."}}`,
		`{"message":"Device token is already registered","documentation_url":"https://cloud.google.com/looker/docs/r/err/4.0/422/post/mobile/device"}`,
	} {
		t.Run(body, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadRequest, body: body})
			res, err := v.submit(t)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.NotErrorIs(t, err, idem.ErrKeyConflict)
			require.Equal(t, idem.StateFailed, res.State)
			require.Empty(t, res.Review)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}

// TestSameActionAlreadyDoneStaysAnotherRequests: a refusal of a state a
// copy of this request may have brought about (a capture's "already
// processed", a card token a charge "already used") may be ours, as
// Toss's ALREADY_PROCESSED_PAYMENT to a confirmation is: never failed.
func TestSameActionAlreadyDoneStaysAnotherRequests(t *testing.T) {
	for _, body := range []string{
		`{"message":"Cannot capture a payment that has already been processed."}`,
		`{"message":"Card token is already used"}`,
		// The request's own action done already (Paytm's 617 "Refund
		// Already Raised", behind a "cannot"): the words are modelled,
		// no page quotes them whole.
		`{"message":"Unable to refund: refund request already raised"}`,
		// Paytm's own words after the "cannot", the action's noun the
		// verb itself: the verb's word again is the action done, not
		// the verb the clause refuses.
		`{"message":"Unable to refund: refund already raised"}`,
	} {
		t.Run(body, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadRequest, body: body})
			res, err := v.submit(t)
			requireForeignKey(t, res, err)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}
