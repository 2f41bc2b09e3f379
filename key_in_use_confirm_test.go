package idem_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Airwallex refuses a request_id it has seen ("duplicate_request": "The
// same idempotency key has already been used",
// https://www.airwallex.com/docs/payments__error-codes), and its
// payment_intent events carry the intent's request_id
// (https://airwallex.com/docs/developer-tools__listen-for-webhook-events__payload-examples__online-payments),
// where a handler finds the operation. Here another request took the key
// first (a second service deriving its keys from the same order ids, the
// same account's events reaching both): its intent of 900 was paid, ours
// of 700 refused to a first attempt, and idem flagged it ReviewKeyInUse:
// what the server holds for the key may be the other's, never taken as
// ours. The other intent's payment_intent.succeeded then reaches our
// handler with the key. Confirm settled ours succeeded with the other's
// intent and cleared the flag: nobody looked, and our payment was never
// made. The flag now stays through Confirm, as ReviewMadeTwice does, until
// a person resolves it.
func TestConfirmKeepsKeyInUse(t *testing.T) {
	var mu sync.Mutex
	var creates int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		creates++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"code":"duplicate_request","message":"The same idempotency key has already been used. Please try again with a different idempotency key."}`)
	}))
	t.Cleanup(srv.Close)
	counts := newSettleCounts()
	var settledReview string
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("x-request-id", idem.KeyBare),
		idem.WithHooks(idem.Hooks{Settle: func(_ context.Context, r *idem.Result) {
			counts.add(counts.hook, r.Key)
			settledReview = r.Review
		}}))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/api/v1/pa/payment_intents/create",
		Body: []byte(`{"amount":700,"currency":"EUR","merchant_order_id":"o-42"}`)})
	requireForeignKey(t, res, err)

	res, err = c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "int_other",
		Source: "airwallex", EventID: "evt_other_succeeded", Reason: "payment_intent.succeeded"})
	require.NoError(t, err, "Confirm()")
	require.Equal(t, idem.StateSucceeded, res.State, "settled as the event says: nothing is sent for it again")
	require.Equal(t, idem.ReviewKeyInUse, res.Review, "the event names the key, which another request holds: a person decides whose it is")
	require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls")
	require.Equal(t, idem.ReviewKeyInUse, settledReview, "the settle hook's Result carries the flag")
	flagged, err := c.List(t.Context(), idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, 1, "List(Review)")

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	res, err = c.Do(t.Context(), op)
	// The success may be the other request's: nil would read "paid" to a
	// caller who ships on a nil error, for a payment perhaps never made.
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do()")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Do()")
	require.NotErrorIs(t, err, idem.ErrFailed, "Do(): a failure would invite a new payment")
	require.Equal(t, idem.StateSucceeded, res.State, "Do(): Result.State")
	require.Equal(t, idem.ReviewKeyInUse, res.Review, "Do(): Result.Review")
	mu.Lock()
	require.Equal(t, 1, creates, "creates: nothing resent")
	mu.Unlock()

	res, err = c.Resolve(t.Context(), "", "k", idem.Resolution{State: idem.StateFailed, Reason: "int_other is the other service's", By: "ops"})
	require.NoError(t, err)
	require.Empty(t, res.Review, "Resolve clears it")
}

// An intent journaled and not sent yet (Prepare, as an outbox's PrepareTx
// does inside the caller's transaction, for a relay to send) has no
// attempt: one is journaled before it is sent. A Stripe event carrying its
// key cannot be about it. It is another request's that used the same key
// (a second service deriving keys from the same order ids: every endpoint
// of the account receives the account's events,
// https://docs.stripe.com/webhooks). Confirm settled the intent succeeded
// with the other's PaymentIntent, unflagged: it was never sent, and
// nobody was told. It is now settled as the event says and flagged
// ReviewKeyInUse, Hooks.Review fired, nothing sent.
func TestConfirmOfAnIntentNeverSent(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, noResultEndpoint(), counts.options())
	_, err := e.client.Prepare(e.ctx, e.req("order-42", `{"amount":700,"metadata":{"idem_key":"order-42"}}`))
	require.NoError(t, err)

	res, err := e.client.Confirm(e.ctx, "", "order-42", othersSuccess)
	require.NoError(t, err, "Confirm()")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, idem.ReviewKeyInUse, res.Review, "nothing of ours was sent: the event is another request's")
	require.Equal(t, 1, counts.get(counts.hook, "order-42"), "settle hook calls")
	require.Equal(t, 1, counts.get(counts.review, "order-42"), "review hook calls")
	flagged, err := e.client.List(e.ctx, idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, 1, "List(Review)")
	_, err = e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Empty(t, e.submits("order-42"), "nothing sent")
	// Never sent, so the success is another request's: the caller who
	// asks must not read it as ours.
	op, err := e.client.Lookup(e.ctx, "", "order-42")
	require.NoError(t, err)
	_, err = e.client.Do(e.ctx, op)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do()")
	require.Empty(t, e.submits("order-42"), "nothing sent by Do")
}
