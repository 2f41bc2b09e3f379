package idem_test

import (
	"net/http"
	"testing"
)

// TestCompoundSubjectRunningStillInFlight: a subject named by two of
// the nouns a request makes, "Payment request", "Refund request", "Order
// request", is the subject itself, not a noun it qualifies: the request
// running may be a copy of ours (a mesh's retry of a first attempt whose
// answer it lost), so it is left for a person, sent once, never failed.
// No page in the stored corpus quotes these words for a named provider
// (the shape is modelled on the order-id check Razorpay describes,
// https://razorpay.com/docs/payments/orders/faqs). A narrower reading
// that required the subject alone to be what runs failed them, and
// was withdrawn: a refusal that names something else running costs a
// person's look, one read as failed a second payment.
func TestCompoundSubjectRunningStillInFlight(t *testing.T) {
	for _, body := range []string{
		`{"message":"Payment request is in progress"}`,
		`{"error":{"code":"BAD_REQUEST","message":"Refund request is already in progress"}}`,
		`{"message":"Payment request with this reference is currently being processed"}`,
		`{"message":"Order request is being processed"}`,
	} {
		t.Run(body, func(t *testing.T) { requireLeftForReview(t, body) })
	}
}

// TestLetteredIDSubjectRunningStillInFlight: an id word ("ID",
// "reference") and an id of letters after it, "Transaction ID
// TXN-ABCD is being processed", name the subject that runs, as an id of
// digits does: left for a person, sent once, never failed. Modelled: a
// merchant's reference need hold no digit.
func TestLetteredIDSubjectRunningStillInFlight(t *testing.T) {
	for _, body := range []string{
		`{"message":"Transaction ID TXN-ABCD is being processed"}`,
		`{"message":"Order reference SPRING_SALE is in progress"}`,
		`{"message":"The order ORD-ABC is being processed"}`,
		`{"message":"Payment you initiated is in progress"}`,
	} {
		t.Run(body, func(t *testing.T) { requireLeftForReview(t, body) })
	}
}

// requireLeftForReview: a first attempt's 400 with body is taken for a
// request that may be ours still running: left for a person, never
// failed, sent once.
func requireLeftForReview(t *testing.T, body string) {
	t.Helper()
	v := newVendor(t, shape{status: http.StatusBadRequest, body: body})
	res, err := v.submit(t)
	requireForeignKey(t, res, err)
	v.requireKeys(t, "Idempotency-Key", "k", 1)
}

// TestSubjectStepRunningStillInFlight: a step of the subject's own
// running named after it ("Payment capture is in progress", "Payment
// attempt is in progress", "Refund processing in progress") or a phrase
// of any preposition that qualifies it ("Payment against this invoice
// is in progress", "Payment via UPI is in progress") still says the
// subject runs: left for a person, sent once,
// never failed. Paddle's words for a payment attempt that runs, "a
// payment attempt is in progress"
// (https://developer.paddle.com/errors/transactions/transaction_immutable_while_processing_payment),
// name it so; the bodies here are modelled on them.
func TestSubjectStepRunningStillInFlight(t *testing.T) {
	for _, body := range []string{
		`{"message":"Payment attempt is in progress"}`,
		`{"message":"Payment capture is in progress"}`,
		`{"message":"Refund processing in progress"}`,
		`{"message":"Payment against this invoice is in progress"}`,
		`{"message":"Payment via UPI is in progress"}`,
	} {
		t.Run(body, func(t *testing.T) { requireLeftForReview(t, body) })
	}
}

// TestCoordinatedSubjectRunningStillInFlight: a predicate of the
// subject joined to the running words by "and" or a comma ("Order has
// been received and is being processed", "Payment initiated, in
// progress") still says the subject itself runs, as
// ever: left for a person, sent once, never failed.
// Modelled: the words of the order confirmations shops send, as a
// gateway's refusal to a second order on an order id that runs.
func TestCoordinatedSubjectRunningStillInFlight(t *testing.T) {
	for _, body := range []string{
		`{"message":"Order has been received and is being processed"}`,
		`{"message":"Order placed and is being processed"}`,
		`{"message":"Payment already initiated and in progress"}`,
		`{"message":"Payment initiated, in progress"}`,
	} {
		t.Run(body, func(t *testing.T) { requireLeftForReview(t, body) })
	}
}

// TestEarlierSubjectRunningStillInFlight: a subject named as an earlier
// one ("Your previous payment is still being processed") or said to be
// "in process" rather than "in progress" still runs, and may be a copy of
// ours: left for a person, sent once, never failed. Modelled on the
// phrasings a review of the subject reading listed as failed.
func TestEarlierSubjectRunningStillInFlight(t *testing.T) {
	for _, body := range []string{
		`{"message":"Your previous payment is still being processed"}`,
		`{"message":"Payment is already in process"}`,
		`{"message":"The earlier order is in process, try again later"}`,
	} {
		t.Run(body, func(t *testing.T) { requireLeftForReview(t, body) })
	}
}
