package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// TestSubjectRunningConflictIsNoReplay: a 409 that says the order's
// payment is in progress, in words that name the payment, not the key,
// and in no error member, is no replay of the key's first answer
// (conflictReplay), even when it echoes the key and carries the order's
// last payment, finished. A PSP that ties one payment to one order id
// refuses a second while one runs (Razorpay: no "initiating another
// payment using the same order id", https://razorpay.com/docs/payments/
// orders/faqs), and the running one may be a copy of this very request
// (a mesh's retry of the first attempt). Read as a replay, the declined
// payment it shows settled the call failed, and a caller told "failed"
// pays again while ours may charge. Never failed, never another's
// resource taken for ours: waited for under the one key until the
// call's budget is spent, then left pending.
func TestSubjectRunningConflictIsNoReplay(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusConflict, header: http.Header{"Idempotency-Key": {"k"}},
		body: `{"id":"pay_1","status":"declined","message":"Another payment for this order is in progress"}`})
	res, err := v.submit(t)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Empty(t, res.ResourceID, "the payment shown taken for ours")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StatePending, res.State)
	// Waited for under the one key, as any 409 "in progress" is.
	v.requireKeys(t, "Idempotency-Key", "k", 5)
}
