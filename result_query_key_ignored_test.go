package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A payment to the Solidgate endpoint that ignores the key
// (keyIgnoringCharges) whose answer is lost (pay_1 charged) is
// resent with the same key; the resend charges again (pay_2) and is
// answered 500, marked ignored: both may have executed, and the operation
// is flagged ReviewKeyIgnored, never resent. Its status endpoint then
// tells of one payment, the order's last. The query settled the
// operation as it said and cleared the flag: the journal read one clean
// payment, no review, while the card may have been charged twice, and a
// decline of the last payment read as a clean failure, which invites the
// checkout to charge a third time under a new key. The settlement keeps a
// review for the other payment, ReviewMaybeTwice, as a confirmation that
// settles such an operation does; whichever call asks the endpoint: the
// Submit itself, the caller's Do, Resume or Run.
func TestResultQueryKeyIgnoredAfterTwoSendsKeepsMaybeTwice(t *testing.T) {
	for _, by := range []string{"Submit", "Do", "Resume", "Run"} {
		for _, tt := range []struct {
			name    string
			status  string
			state   idem.State
			wantErr error // the call's error once settled; nil: none
		}{
			{"pay_2 settled", "settled", idem.StateSucceeded, nil},
			// A decline of one copy says nothing of the other's charge:
			// no failure to offer again under a new key.
			{"pay_2 declined", "declined", idem.StateFailed, idem.ErrNeedsReview},
		} {
			t.Run(by+"/"+tt.name, func(t *testing.T) {
				s := newKeyIgnoringCharges(t, lostThenIgnored)
				clock := idemtest.NewClock(epoch)
				var (
					mu              sync.Mutex
					reviews, settle []*idem.Result
				)
				c := clientFor(t, s.srv, clock, idem.WithHooks(idem.Hooks{
					Review: func(_ context.Context, r *idem.Result) { mu.Lock(); reviews = append(reviews, r); mu.Unlock() },
					Settle: func(_ context.Context, r *idem.Result) { mu.Lock(); settle = append(settle, r); mu.Unlock() },
				}))
				req := idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
					Body: []byte(`{"amount":100,"order_id":"o-1"}`)}
				// The query after the first answer was lost finds nothing
				// yet (the order not on the read path): the payment is
				// resent. Submit's own query after the resend finds it.
				queries := 2
				if by != "Submit" {
					queries = 3 // not Submit's either: left flagged
				}
				s.answerFrom(queries, orderStatus("pay_2", tt.status))
				res, err := c.Submit(t.Context(), req)
				if by != "Submit" {
					require.ErrorIs(t, err, idem.ErrNeedsReview)
					require.Equal(t, idem.ReviewKeyIgnored, res.Review)
					s.requireSeen(t, []string{"k", "k"}, 2)
				}
				switch by {
				case "Do":
					op, lerr := c.Lookup(t.Context(), "", "k")
					require.NoError(t, lerr)
					res, err = c.Do(t.Context(), op)
				case "Resume":
					sum, rerr := c.Resume(t.Context())
					require.NoError(t, rerr)
					require.Equal(t, 1, sum.Visited, "Resume: visited")
				case "Run":
					op, lerr := c.Lookup(t.Context(), "", "k")
					require.NoError(t, lerr)
					clock.Advance(op.NextDue.Sub(epoch)) // due now
					ctx, cancel := context.WithCancel(t.Context())
					ran := make(chan struct{})
					go func() { _ = c.Run(ctx); close(ran) }()
					require.Eventually(t, func() bool {
						op, err := c.Lookup(t.Context(), "", "k")
						return err == nil && op.State != idem.StateUnknown
					}, 15*time.Second, time.Millisecond, "Run settles the operation")
					cancel()
					<-ran
				}
				if by == "Submit" || by == "Do" {
					if tt.wantErr == nil {
						require.NoError(t, err, "%s(): a success made is a success, Review beside it", by)
					} else {
						require.ErrorIs(t, err, tt.wantErr, by)
						require.ErrorIs(t, err, idem.ErrUnknownOutcome, by)
						require.NotErrorIs(t, err, idem.ErrFailed, by)
					}
					require.Equal(t, tt.state, res.State, "%s(): State", by)
					require.Equal(t, idem.ReviewMaybeTwice, res.Review, "%s(): Review: the other copy may have charged", by)
				}
				s.requireSeen(t, []string{"k", "k"}, queries)

				op, err := c.Lookup(t.Context(), "", "k")
				require.NoError(t, err)
				require.Equal(t, tt.state, op.State, "journal: State")
				require.Equal(t, "pay_2", op.Result.ResourceID, "journal: ResourceID")
				require.Equal(t, idem.ReviewMaybeTwice, op.Review, "journal: Review")
				require.Equal(t, 2+queries, op.Attempts, "journal: attempts, two charges and the queries")
				flagged, err := c.List(t.Context(), idem.Filter{Review: true})
				require.NoError(t, err)
				require.Len(t, flagged, 1, "List(Review)")

				// Settled: a later Do sends nothing and says the same.
				_, err = c.Do(t.Context(), op)
				if tt.wantErr == nil {
					require.NoError(t, err, "Do() once settled")
				} else {
					require.ErrorIs(t, err, tt.wantErr, "Do() once settled")
					require.NotErrorIs(t, err, idem.ErrFailed, "Do() once settled")
				}
				s.requireSeen(t, []string{"k", "k"}, queries)
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, settle, 1, "Settle hook calls")
				require.Equal(t, idem.ReviewMaybeTwice, settle[0].Review, "Settle hook: Review")
				// A drive that settles an operation flagged so tells the
				// Review hook, as it does for ReviewMadeTwice: once more
				// after the flagging, unless both were this call's.
				wantReviews := []string{idem.ReviewMaybeTwice}
				if by != "Submit" {
					wantReviews = []string{idem.ReviewKeyIgnored, idem.ReviewMaybeTwice}
				}
				var got []string
				for _, r := range reviews {
					got = append(got, r.Review)
				}
				require.Equal(t, wantReviews, got, "Review hook calls")
			})
		}
	}
}

// The same endpoint, known already to ignore the key (an earlier
// payment's answer said so): a payment whose first answer is lost is not
// resent, flagged ReviewKeyIgnored with one send that may have executed.
// The status endpoint tells of that one send: settled, no review left.
func TestResultQueryKeyIgnoredAfterOneSendClearsReview(t *testing.T) {
	s := newKeyIgnoringCharges(t, secondAnswerLost)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	url := s.srv.URL + "/api/v1/charge"
	_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err)
	s.answerFrom(1, orderStatus("pay_2", "settled"))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: url, ResultURL: s.srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.NoError(t, err, "Submit(): settled by the status endpoint")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Empty(t, res.Review, "Submit(): Review: one send, settled")
	s.requireSeen(t, []string{"k0", "k"}, 1)

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, "pay_2", op.Result.ResourceID)
	require.Empty(t, op.Review, "journal: Review")
	require.Equal(t, 2, op.Attempts, "journal: attempts, one charge and the query")
}
