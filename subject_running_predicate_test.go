package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A refusal that names a payment or an order "in progress" only in
// passing refuses the request for what something else is doing: nothing
// of it ran, a plain failure. idem took any "in progress" after a
// subject opening the clause for the subject's own request running, and
// left these for a person (ReviewKeyInUse):
//   - AndDone's 400 Key_InProgressTransactionCanNotBeRefunded,
//     "Transactions that are currently in progress cannot be refunded."
//     (https://docs.qat.anddone.com/docs/refund-api-error-table): a refund
//     refused because the payment has not settled, which no copy of the
//     refund brought about. The words are the page's; the JSON around
//     them is modelled.
//   - "Payment method verification in progress", "Payment link creation
//     in progress": the subject is the verification or the creation, the
//     payment only qualifies it (modelled, no page quotes them).
//   - "Payouts are not allowed while a KYC check is in progress": what
//     runs is the check, in a clause of its own (modelled).
func TestSubjectRunningOnlyInPassingIsAFailure(t *testing.T) {
	for _, body := range []string{
		`{"code":"Key_InProgressTransactionCanNotBeRefunded","message":"Transactions that are currently in progress cannot be refunded."}`,
		`{"message":"Transactions currently in progress cannot be refunded."}`,
		`{"message":"Payment method verification in progress"}`,
		`{"message":"Payment link creation in progress"}`,
		`{"message":"Payouts are not allowed while a KYC check is in progress"}`,
	} {
		t.Run(body, func(t *testing.T) { requirePlainFailure(t, body) })
	}
}

// requirePlainFailure submits a request a server answers 400 with body,
// and requires a plain failure: ErrFailed, no review, one send.
func requirePlainFailure(t *testing.T, body string) {
	t.Helper()
	v := newVendor(t, shape{status: http.StatusBadRequest, body: body})
	res, err := v.submit(t)
	require.ErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.StateFailed, res.State)
	require.Empty(t, res.Review)
	v.requireKeys(t, "Idempotency-Key", "k", 1)
}

// TestSubjectRunningStillInFlight: the subject itself running, whatever
// stands between it and the words, stays another request's or a copy of
// ours: left for a person, sent once.
//   - "Another payment for this order is in progress" (modelled).
//   - PayU India's refund error_code 120, "Transaction lock could not be
//     obtained." (https://docs.payu.in/docs/error-codes-for-refund-initiation),
//     while a refund request on the payment holds its lock.
//   - Kite's "Order cannot be modified as it is being processed": the
//     order is "in transit" because an instruction on it, perhaps a copy
//     of this modify, still runs in its OMS
//     (https://v2.webnotes.in/order-cannot-be-modified-processing/).
//   - "Order 2042130686722629633 is being processed", Kite's order ids
//     being numbers (modelled).
func TestSubjectRunningStillInFlight(t *testing.T) {
	for _, body := range []string{
		`{"message":"Another payment for this order is in progress"}`,
		`{"status":0,"msg":"Transaction lock could not be obtained.","error_code":120}`,
		`{"status":"error","message":"Order cannot be modified as it is being processed.","data":null,"error_type":"OrderException"}`,
		`{"status":"error","message":"Order 2042130686722629633 is being processed.","data":null,"error_type":"OrderException"}`,
	} {
		t.Run(body, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadRequest, body: body})
			res, err := v.submit(t)
			requireForeignKey(t, res, err)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}
