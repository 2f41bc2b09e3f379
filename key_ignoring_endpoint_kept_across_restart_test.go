package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A Solidgate payment endpoint that does not de-duplicate by the key
// ("Idempotency support varies by endpoint. [...] A value of ignored means
// the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) answered a
// first payment (k1, pay_1) 500 marked ignored: flagged ReviewKeyIgnored,
// and settled since, by its "Updated Card Order" event (one send: settled
// clean) or by an operator's Resolve. What the process had learnt of the
// endpoint lived in its memory and in that open record only: the next
// process, on the same journal, read nothing of it, sent a new payment
// (k2) there as to an endpoint that de-duplicates, and when its answer was
// lost (pay_2 charged) resent it with the same key, which the endpoint
// charged again (pay_3). The endpoint is journaled when it is learnt
// (KeyIgnoringStore), so the next process sends k2 once and flags it for
// review: one charge per key.
func TestKeyIgnoringEndpointKeptAfterItsRecordsSettle(t *testing.T) {
	for _, tt := range []struct {
		name   string
		settle func(t *testing.T, c *idem.Client)
		want   string // k1's Review once settled
		resume bool   // the next process calls Resume at start-up, as README's start-up does
	}{
		{"settled by its webhook", func(t *testing.T, c *idem.Client) {
			res, err := c.Confirm(t.Context(), "", "k1", cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok"))
			require.NoError(t, err, "Confirm(k1)")
			require.Equal(t, idem.StateSucceeded, res.State)
		}, "", false},
		{"resolved by an operator", func(t *testing.T, c *idem.Client) {
			res, err := c.Resolve(t.Context(), "", "k1", idem.Resolution{State: idem.StateSucceeded, ResourceID: "pay_1",
				Reason: "one charge in the dashboard", By: "ops"})
			require.NoError(t, err, "Resolve(k1)")
			require.Equal(t, idem.StateSucceeded, res.State)
		}, "", false},
		{"settled by its webhook, Resume at start-up", func(t *testing.T, c *idem.Client) {
			_, err := c.Confirm(t.Context(), "", "k1", cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok"))
			require.NoError(t, err, "Confirm(k1)")
		}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
				if n == 2 {
					dropConnection(w) // pay_2 charged, its answer lost
					return
				}
				ignoredInternalError(w) // pay_1; pay_3 if k2 were resent
			})
			open := reopenable(t, s.srv)
			charge := s.srv.URL + "/api/v1/charge"

			c, store := open()
			res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k1)")
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			tt.settle(t, c)
			op, err := c.Lookup(t.Context(), "", "k1")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State, "journal: k1's State")
			require.Equal(t, tt.want, op.Review, "journal: k1's Review")
			require.NoError(t, c.Close())
			require.NoError(t, store.Close())

			c, _ = open() // a restart: no open operation says the endpoint ignores the key
			if tt.resume {
				// Resume reads the open operations, none flagged: the
				// journaled endpoint must be read all the same.
				sum, err := c.Resume(t.Context())
				require.NoError(t, err, "Resume()")
				require.Zero(t, sum.Visited, "Resume(): nothing open")
			}
			res, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":100}`)})
			s.requireSeen(t, []string{"k1", "k2"}, 0)
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k2): its lost answer may have charged, and a resend would charge again")
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			op, err = c.Lookup(t.Context(), "", "k2")
			require.NoError(t, err)
			require.Equal(t, 1, op.Attempts, "journal: k2's attempts")
			require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k2's Review")
			require.Equal(t, idem.StateUnknown, op.State, "journal: k2's State: open, its answer lost")
		})
	}
}

// storeOnly is a Store that keeps no endpoints (it implements Store, not
// idem.KeyIgnoringStore), as a release before they were journaled left a
// journal: only its open operations flagged for an endpoint tell a later
// process of it.
type storeOnly struct{ idem.Store }
