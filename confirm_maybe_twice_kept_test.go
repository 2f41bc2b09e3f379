package idem_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A payment to a Solidgate endpoint that does not de-duplicate by the key
// (https://api-docs.solidgate.com/api/v2/idempotent-requests: "A value of
// ignored means the endpoint does not") is sent twice, pay_1's answer
// lost and pay_2's a 500 marked ignored, and an "Updated Card Order" event
// settles it, flagged ReviewMaybeTwice: the card may be charged twice.
// A later event that contradicts the settlement (pay_2 declined after
// all, or pay_1's own success) replaced that reason with
// ReviewConfirmConflict: the person then read that an event disagreed,
// settled the one payment, and nothing said any more that two charges
// were possible. The reason stays ReviewMaybeTwice; the contradiction is
// recorded beside it, Confirm's error and the ConfirmConflict hook tell of
// it, and a decline of the payment the success names still makes Do's
// answer an error, as ReviewConfirmConflict did.
func TestConfirmConflictKeepsMaybeTwice(t *testing.T) {
	for _, tt := range []struct {
		name    string
		conf    idem.Confirmation
		wantErr error // Do's error afterwards; nil: none
	}{
		{"pay_2 declined after its success", cardOrderUpdated(idem.StateFailed, "pay_2", "evt_pay_2_auth_failed"), idem.ErrNeedsReview},
		{"pay_1 succeeded too", cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok"), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, lostThenIgnored)
			var (
				mu                 sync.Mutex
				reviews, conflicts []string
			)
			c := clientFor(t, s.srv, idemtest.NewClock(epoch), idem.WithHooks(idem.Hooks{
				Review: func(_ context.Context, r *idem.Result) { mu.Lock(); reviews = append(reviews, r.Review); mu.Unlock() },
				ConfirmConflict: func(_ context.Context, r *idem.Result, conf idem.Confirmation) {
					mu.Lock()
					conflicts = append(conflicts, conf.EventID+" "+r.Review)
					mu.Unlock()
				},
			}))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			res, err = c.Confirm(t.Context(), "", "k", cardOrderUpdated(idem.StateSucceeded, "pay_2", "evt_pay_2_settle_ok"))
			require.NoError(t, err)
			require.Equal(t, idem.ReviewMaybeTwice, res.Review)

			res, err = c.Confirm(t.Context(), "", "k", tt.conf)
			require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm(): the contradiction")
			require.Equal(t, idem.StateSucceeded, res.State, "Confirm(): the settlement is kept")
			require.Equal(t, "pay_2", res.ResourceID)
			require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Confirm(): Review: two charges still possible")

			op, err := c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewMaybeTwice, op.Review, "journal: Review")
			require.Equal(t, idem.StateSucceeded, op.State, "journal: State")
			flagged, err := c.List(t.Context(), idem.Filter{Review: true})
			require.NoError(t, err)
			require.Len(t, flagged, 1, "List(Review)")

			res, err = c.Do(t.Context(), op)
			if tt.wantErr == nil {
				require.NoError(t, err, "Do(): pay_2's success is not disputed")
			} else {
				require.ErrorIs(t, err, tt.wantErr, "Do(): a decline of pay_2 disputes its success")
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Do()")
				require.NotErrorIs(t, err, idem.ErrFailed, "Do()")
			}
			require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Do(): Review")
			s.requireCharges(t, []string{"k", "k"})

			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, []string{idem.ReviewKeyIgnored}, reviews, "Review hook calls: the flagging, once")
			require.Equal(t, []string{tt.conf.EventID + " " + idem.ReviewMaybeTwice}, conflicts, "ConfirmConflict hook calls")
		})
	}
}
