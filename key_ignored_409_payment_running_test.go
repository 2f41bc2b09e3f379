package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// paymentRunning is the charge endpoint's 409 (ignoredOrderRefusal)
// saying the order's payment is being processed, modelled on an order
// API that locks the order while a payment on it runs ("Payment with this
// order id is in progress"): about the order, never the key, which it
// does not read.
const paymentRunning = "Payment for this order is being processed"

// runningBehindSidecar is chargesBehindSidecar's endpoint whose sidecar's
// copy meets the payment its first copy started, still running
// (modelled: the pod's connection reset mid-payment).
func runningBehindSidecar(t *testing.T) *chargesBehindSidecar {
	t.Helper()
	return newChargesBehindSidecarSaying(t, paymentRunning)
}

// A 409 marked ignored saying the order's payment runs was read as any
// 409, another request holding the key, and resent once it was done: on
// an endpoint that executes every copy, the resend charged again (pay_3)
// though the running payment was this request's own (the sidecar's first
// copy, pay_1). Nothing is resent: the result endpoint is asked as for a
// request in flight, and here finds the payment processing, then
// settled, which is left for a person as any payment of the order it
// names after such a 409 (TestKeyIgnoredOrderPaidByAnotherRequestIsNotTakenAsOurs).
// One request from idem, one charge, two queries.
func TestKeyIgnoredPaymentRunningOnAFirstAttemptIsAwaitedNotResent(t *testing.T) {
	b := runningBehindSidecar(t)
	b.keyIgnoringCharges.mu.Lock()
	b.result = func(n int, w http.ResponseWriter) {
		if n == 1 {
			orderStatus("pay_1", "running")(w) // modelled: the payment under way
			return
		}
		orderStatus("pay_1", "settled")(w)
	}
	b.keyIgnoringCharges.mu.Unlock()
	c := clientFor(t, b.sidecar, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), b.request(b.resultURL()))
	b.requireFlagged(t, res, err, 2)
}

// As above, but the result endpoint never finds the payment within the
// call's budget (its read path behind, modelled): "not found" is no
// answer while the endpoint said a payment runs, so it is asked again
// until the budget ends, and nothing is resent. Unknown, flagged
// ReviewKeyIgnored (ErrNeedsReview): exactly one send, the default
// budget's queries.
func TestKeyIgnoredPaymentRunningUnconfirmedIsFlaggedNotResent(t *testing.T) {
	b := runningBehindSidecar(t)
	c := clientFor(t, b.sidecar, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), b.request(b.resultURL()))
	b.requireFlagged(t, res, err, idem.DefaultMaxAttempts-1) // the budget's attempts: the submit, then queries
}

// Without a result endpoint nothing can say whose payment runs: flagged
// at once, unknown, ReviewKeyIgnored; one request, never resent.
func TestKeyIgnoredPaymentRunningWithoutResultEndpointIsFlagged(t *testing.T) {
	b := runningBehindSidecar(t)
	c := clientFor(t, b.sidecar, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), b.request(""))
	b.requireFlagged(t, res, err, 0)
}
