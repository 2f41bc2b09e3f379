package idem_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A payment to the Solidgate endpoint that ignores the key
// (keyIgnoringCharges) whose answer is lost (pay_1 charged) is
// resent with the same key, as to any endpoint not known to ignore it;
// the resend charges again (pay_2) and is answered 500, marked ignored:
// both may have executed, and the operation is flagged ReviewKeyIgnored,
// never resent. Solidgate's webhook then tells of one of the payments.
// Confirm settled the operation as the event said and cleared the flag:
// the journal read one clean payment, no review, while the card may have
// been charged twice, and a failure event for one payment (the other
// charged) read as a clean failure, which invites the checkout to charge
// a third time under a new key. The settlement keeps a review for the
// other payment: ReviewMaybeTwice, as an answer that settles such an
// operation does.
func TestConfirmKeyIgnoredAfterTwoSendsKeepsMaybeTwice(t *testing.T) {
	for _, tt := range []struct {
		name    string
		conf    idem.Confirmation
		wantErr error // Do's error for the settled operation; nil: none
	}{
		{"pay_2 succeeded", cardOrderUpdated(idem.StateSucceeded, "pay_2", "evt_pay_2_settle_ok"), nil},
		{"pay_1 succeeded", cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok"), nil},
		// A decline of one copy says nothing of the other's charge: no
		// failure to offer again under a new key.
		{"pay_2 declined", cardOrderUpdated(idem.StateFailed, "pay_2", "evt_pay_2_auth_failed"), idem.ErrNeedsReview},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
				if n == 1 {
					dropConnection(w) // pay_1 charged, its answer lost
					return
				}
				ignoredInternalError(w) // pay_2 charged
			})
			var (
				mu              sync.Mutex
				reviews, settle []*idem.Result
			)
			c := clientFor(t, s.srv, idemtest.NewClock(epoch), idem.WithHooks(idem.Hooks{
				Review: func(_ context.Context, r *idem.Result) { mu.Lock(); reviews = append(reviews, r); mu.Unlock() },
				Settle: func(_ context.Context, r *idem.Result) { mu.Lock(); settle = append(settle, r); mu.Unlock() },
			}))
			req := idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100,"order_id":"o-1"}`)}
			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			s.requireCharges(t, []string{"k", "k"})
			op, err := c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			require.Equal(t, 2, op.Attempts, "attempts")

			res, err = c.Confirm(t.Context(), "", "k", tt.conf)
			require.NoError(t, err, "Confirm()")
			require.Equal(t, tt.conf.State, res.State, "Confirm(): State")
			require.Equal(t, tt.conf.ResourceID, res.ResourceID, "Confirm(): ResourceID")
			require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Confirm(): Review: the other copy may have charged")

			op, err = c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			require.Equal(t, tt.conf.State, op.State, "journal: State")
			require.Equal(t, idem.ReviewMaybeTwice, op.Review, "journal: Review")
			flagged, err := c.List(t.Context(), idem.Filter{Review: true})
			require.NoError(t, err)
			require.Len(t, flagged, 1, "List(Review)")

			_, err = c.Do(t.Context(), op)
			if tt.wantErr == nil {
				require.NoError(t, err, "Do(): a success made is a success, Review beside it")
			} else {
				require.ErrorIs(t, err, tt.wantErr, "Do()")
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Do()")
				require.NotErrorIs(t, err, idem.ErrFailed, "Do()")
			}
			s.requireCharges(t, []string{"k", "k"})
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, settle, 1, "Settle hook calls")
			require.Equal(t, idem.ReviewMaybeTwice, settle[0].Review, "Settle hook: Review")
			require.Len(t, reviews, 1, "Review hook calls: the flagging, once (the settlement keeps it flagged)")
		})
	}
}

// The same endpoint, known already to ignore the key (an earlier
// payment's answer said so): a payment whose first answer is lost is not
// resent, flagged ReviewKeyIgnored with one send that may have executed.
// The webhook's event tells of that one send: settled, no review left.
func TestConfirmKeyIgnoredAfterOneSendClearsReview(t *testing.T) {
	s := newKeyIgnoringCharges(t, secondAnswerLost)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	url := s.srv.URL + "/api/v1/charge"
	_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err)
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: url, Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	s.requireCharges(t, []string{"k0", "k"})

	res, err = c.Confirm(t.Context(), "", "k", cardOrderUpdated(idem.StateSucceeded, "pay_2", "evt_pay_2_settle_ok"))
	require.NoError(t, err, "Confirm()")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Empty(t, res.Review, "Confirm(): Review: one send, confirmed")
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Empty(t, op.Review, "journal: Review")
	s.requireCharges(t, []string{"k0", "k"})
}
