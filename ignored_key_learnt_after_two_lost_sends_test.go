package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A payment to a Solidgate endpoint that does not de-duplicate by the key
// ("A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) loses its
// answer (pay_1 charged); the order's status endpoint finds nothing yet,
// and idem, not knowing yet that the endpoint ignores the key, resends
// with the same key: that answer is lost too (pay_2 charged) as the
// caller gives up. Another payment's answer then says the endpoint ignores
// the key (pay_3). The next visit of the first is blocked from resending
// (ReviewKeyIgnored, learnt from the other payment), but the journal
// never said so: the status query that then settled it (pay_2 settled)
// left no review, though two sends may have charged, and a query that
// found it still processing left it unflagged, so the "Updated Card
// Order" event that settled it later cleared what was never set. Either
// way the card may be charged twice and nobody is asked to look. The
// drive that is blocked so flags the record in the journal with its next
// write: settled by the query or by the event, it keeps ReviewMaybeTwice,
// as one flagged by its own answers does.
func TestIgnoredKeyLearntAfterTwoLostSendsKeepsMaybeTwice(t *testing.T) {
	for _, tt := range []struct {
		name        string
		status      string // the status endpoint's answer to the blocked drive's query
		confirm     bool   // the webhook's event settles it after the query
		wantReviews []string
	}{
		{"settled by the status query", "settled", false, []string{idem.ReviewMaybeTwice}},
		{"settled by the webhook after processing", "processing", true, []string{idem.ReviewKeyIgnored}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu              sync.Mutex
				stop            context.CancelFunc // the call whose request this is gives up
				reviews, settle []*idem.Result
			)
			s := newKeyIgnoringCharges(t, twoLostThen(&mu, &stop, ignoredCreated))
			c := clientFor(t, s.srv, idemtest.NewClock(epoch), idem.WithHooks(idem.Hooks{
				Review: func(_ context.Context, r *idem.Result) { mu.Lock(); reviews = append(reviews, r); mu.Unlock() },
				Settle: func(_ context.Context, r *idem.Result) { mu.Lock(); settle = append(settle, r); mu.Unlock() },
			}))
			url := s.srv.URL + "/api/v1/charge"

			submitUntilGivenUp(t, c, s, &mu, &stop)
			s.requireSeen(t, []string{"k", "k"}, 1)

			_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
			require.NoError(t, err, "the other payment, whose answer says the key is ignored")
			s.requireSeen(t, []string{"k", "k", "k0"}, 1)

			doCtx, doCancel := context.WithCancel(t.Context())
			defer doCancel()
			s.answerFrom(2, func(w http.ResponseWriter) {
				if !tt.confirm {
					orderStatus("pay_2", tt.status)(w)
					return
				}
				// The caller stops waiting for a payment still processing,
				// which the endpoint answers 202 Accepted (modelled): a 200
				// with its status "processing" is a payment DecodeJSON takes
				// as made, and whether the call read that answer before it
				// saw its context end was a race.
				doCancel()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = fmt.Fprintf(w, `{"id":"pay_2","order_id":"o-1","status":%q}`, tt.status)
			})
			op, err := c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			res, err := c.Do(doCtx, op)
			s.requireSeen(t, []string{"k", "k", "k0"}, 2)
			if tt.confirm {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Do(): still processing")
				require.Equal(t, idem.ReviewKeyIgnored, res.Review, "Do(): Review: never resent, and the journal says why")
				res, err = c.Confirm(t.Context(), "", "k", cardOrderUpdated(idem.StateSucceeded, "pay_2", "evt_pay_2_settle_ok"))
				require.NoError(t, err, "Confirm()")
			} else {
				require.NoError(t, err, "Do(): a success made is a success, Review beside it")
			}
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "pay_2", res.ResourceID)
			require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Review: pay_1 may have charged too")

			op, err = c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State, "journal: State")
			require.Equal(t, idem.ReviewMaybeTwice, op.Review, "journal: Review")
			require.Equal(t, 4, op.Attempts, "journal: attempts, two charges and two queries")
			flagged, err := c.List(t.Context(), idem.Filter{Review: true})
			require.NoError(t, err)
			require.Len(t, flagged, 1, "List(Review)")
			s.requireSeen(t, []string{"k", "k", "k0"}, 2)

			mu.Lock()
			defer mu.Unlock()
			require.Len(t, settle, 2, "Settle hook calls: k0's and k's")
			require.Equal(t, "k", settle[1].Key)
			require.Equal(t, idem.ReviewMaybeTwice, settle[1].Review, "Settle hook: Review")
			var got []string
			for _, r := range reviews {
				got = append(got, r.Key+" "+r.Review)
			}
			want := make([]string, 0, len(tt.wantReviews))
			for _, r := range tt.wantReviews {
				want = append(want, "k "+r)
			}
			require.Equal(t, want, got, "Review hook calls")
		})
	}
}
