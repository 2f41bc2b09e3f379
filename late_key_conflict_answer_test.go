package idem_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Stripe answers 409 idempotency_key_in_use while another request holds
// the key, and once that request is done, replays its stored answer
// (Idempotent-Replayed: true) to a resend with the same parameters, or
// refuses one with other parameters with a 400 idempotency_error
// (https://docs.stripe.com/idempotency). Every webhook endpoint of the
// account receives the account's events (https://docs.stripe.com/webhooks),
// so a second service deriving keys from the same order ids has its
// payment_intent.succeeded, carrying our key in its metadata, handed to
// Confirm. Confirmed while our resend was on the wire, it settled ours
// succeeded with the other PaymentIntent, unflagged (an attempt of ours
// may have executed), and the resend's answer, a key conflict, was
// dropped: the call ended with a nil error, "paid", ours never made. The
// answer is now recorded against the settlement and flags it
// ReviewKeyInUse; the call ends in ErrNeedsReview. So with the other
// request's payment_intent.payment_failed and its success replayed; a
// refusal of the key leaves a failure as it is: nothing of ours ran. So
// too when the resend is answered that it did not execute (the same 409,
// the other request still running; a 429, Stripe's rate limit): none of
// our attempts ran, so the success confirmed is the other request's, as
// it is when the event comes while the call waits to resend.
func TestLateKeyConflictAnswerFlagsConfirmedSuccess(t *testing.T) {
	inUse := `{"error":{"code":"idempotency_key_in_use","type":"invalid_request_error",` +
		`"message":"There is currently another in-progress request using this Stripe API key and idempotency key."}}`
	replayed := http.Header{"Idempotent-Replayed": {"true"}}
	const theirs = `{"id":"pi_other","object":"payment_intent","status":"succeeded","amount":900}`
	const rateLimited = `{"error":{"code":"rate_limit","type":"invalid_request_error","message":"Too many requests hit the API too quickly."}}`
	const otherParameters = `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters ` +
		`they were first used with. Try using a key other than 'order-42' if you meant to execute a different request."}}`
	for _, tc := range []struct {
		name   string
		event  idem.State
		status int
		header http.Header
		body   string
		review string // "": the call ends in ErrFailed
	}{
		{"their success replayed", idem.StateSucceeded, http.StatusOK, replayed, theirs, idem.ReviewKeyInUse},
		{"400 keys only with the same parameters", idem.StateSucceeded, http.StatusBadRequest, nil, otherParameters, idem.ReviewKeyInUse},
		{"their failure, their success replayed", idem.StateFailed, http.StatusOK, replayed, theirs, idem.ReviewKeyInUse},
		{"their failure, 400 keys only with the same parameters", idem.StateFailed, http.StatusBadRequest, nil, otherParameters, ""},
		{"409 the key still in use", idem.StateSucceeded, http.StatusConflict, nil, inUse, idem.ReviewKeyInUse},
		{"their failure, 409 the key still in use", idem.StateFailed, http.StatusConflict, nil, inUse, ""},
		{"429 rate limited", idem.StateSucceeded, http.StatusTooManyRequests, nil, rateLimited, idem.ReviewKeyInUse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, release := make(chan struct{}), make(chan struct{})
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				n := len(keys)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if n == 1 {
					w.WriteHeader(http.StatusConflict)
					_, _ = io.WriteString(w, inUse)
					return
				}
				// The resend is on the wire: the other request's event
				// is confirmed before its answer leaves.
				arrived <- struct{}{}
				<-release
				for name, vals := range tc.header {
					w.Header()[name] = vals
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			var reviews atomic.Int32
			c := clientFor(t, srv, idemtest.NewClock(epoch),
				idem.WithHooks(idem.Hooks{Review: func(context.Context, *idem.Result) { reviews.Add(1) }}))

			done := submitOrder42(t, c, srv.URL)
			select {
			case <-arrived:
			case o := <-done:
				t.Fatalf("Submit ended before resending: %v", o.err)
			}
			res, err := c.Confirm(t.Context(), "", "order-42", idem.Confirmation{State: tc.event, ResourceID: "pi_other",
				Source: "stripe", EventID: "evt_other"})
			require.NoError(t, err, "Confirm()")
			require.Equal(t, tc.event, res.State)
			require.Empty(t, res.Review, "an attempt of ours was on the wire: the event may be ours")
			close(release)

			o := <-done
			if tc.review == "" {
				require.ErrorIs(t, o.err, idem.ErrFailed, "Submit()")
				require.EqualValues(t, 0, reviews.Load(), "review hook calls")
			} else {
				require.ErrorIs(t, o.err, idem.ErrNeedsReview, "Submit(): nil reads \"paid\"")
				require.ErrorIs(t, o.err, idem.ErrUnknownOutcome, "Submit()")
				require.NotErrorIs(t, o.err, idem.ErrFailed, "Submit(): a failure would invite a new payment")
				require.EqualValues(t, 1, reviews.Load(), "review hook calls")
			}
			require.Equal(t, tc.event, o.res.State, "the settlement is kept")
			require.Equal(t, tc.review, o.res.Review)

			rec, err := c.Record(t.Context(), "", "order-42")
			require.NoError(t, err)
			require.Equal(t, tc.review, rec.Review, "journaled")
			require.Equal(t, "pi_other", rec.Result.ResourceID)

			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, []string{"order-42", "order-42"}, keys, "submits, each with the key")
		})
	}
}
