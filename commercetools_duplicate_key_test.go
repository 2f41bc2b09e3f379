package idem_test

import (
	"fmt"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// ctPayments are commercetools Payments keyed by their own "key"
// (ctResources).
func ctPayments() *ctResources {
	return &ctResources{lookup: "/shop/payments/key=", field: "key", typeID: "payment", render: ctPayment}
}

// ctPayment is a Payment as commercetools answers it: no status of its
// own (paymentStatus holds a PSP's codes and a State reference), its
// amount in amountPlanned.
func ctPayment(id, key string) string {
	return fmt.Sprintf(`{"id":%q,"version":1,"key":%q,"amountPlanned":{"type":"centPrecision","currencyCode":"EUR","centAmount":4200,"fractionDigits":2},"paymentMethodInfo":{"paymentInterface":"psp","method":"card"},"paymentStatus":{},"transactions":[],"interfaceInteractions":[],"createdAt":"2026-11-29T12:00:00.000Z","lastModifiedAt":"2026-11-29T12:00:00.000Z"}`, id, key)
}

const ctKey = "pay-2026-11-29-000731"

var ctDraft = `{"key":"` + ctKey + `","amountPlanned":{"currencyCode":"EUR","centAmount":4200},"paymentMethodInfo":{"paymentInterface":"psp","method":"card"}}`

func ctRequest(base string) idem.Request {
	return idem.Request{Key: ctKey, URL: base + "/shop/payments", Body: []byte(ctDraft)}
}

// A create whose answer is lost is looked up by its key (GET
// /{projectKey}/payments/key={key}, the endpoint a user gives
// WithResultEndpoint) before anything is resent: the Payment found,
// which has no status of its own, settles it, one payment made.
func TestCommercetoolsLostCreateSettledByKeyLookup(t *testing.T) {
	ct := ctPayments()
	ct.lose = 1
	srv := ct.start(t)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithResultEndpoint("/shop/payments/key={key}"))

	res, err := c.Submit(t.Context(), ctRequest(srv.URL))
	requireOutcome(t, res, err, idem.StateSucceeded, nil, ct.made(ctKey), "")
	ct.requireOne(t, ctKey, ctDraft, 1, 1)
}

// Without a lookup, the create whose answer was lost is resent with the
// same key and refused 400 DuplicateField for the field "key" (or
// DuplicateFieldWithConflictingResource naming the payment): the
// payment is ours, so the refusal is no failure (ErrFailed would invite
// it again under a new key). It is resent as any refusal after a send
// may be a gateway's, then left for a person; one payment.
func TestCommercetoolsDuplicateKeyAfterLostAnswerIsNoFailure(t *testing.T) {
	for _, conflicting := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflictingResource=%v", conflicting), func(t *testing.T) {
			ct := ctPayments()
			ct.lose, ct.conflicting = 1, conflicting
			srv := ct.start(t)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody())

			res, err := c.Submit(t.Context(), ctRequest(srv.URL))
			requireRefusedAfterSend(t, c, res, err, ctKey, "payment made under the key")
			ct.requireOne(t, ctKey, ctDraft, 4, 0)
		})
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy
// (Istio retries the 503 of an upstream reset, the payment made): the
// payment may be ours, so it is flagged for a person (ReviewKeyInUse),
// never failed nor resent.
func TestCommercetoolsDuplicateKeyToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, conflicting := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflictingResource=%v", conflicting), func(t *testing.T) {
			ct := ctPayments()
			ct.unavailable, ct.conflicting = true, conflicting
			sidecar := retryingSidecar(t, ct.serve)
			c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody())

			requireLeftForAPerson(t, c, ctRequest(sidecar.URL), "A duplicate value")
			ct.requireOne(t, ctKey, ctDraft, 2, 0)
		})
	}
}
