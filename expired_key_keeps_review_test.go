package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// An operation flagged for a reason that tells a person something
// specific (another request's payment under the key, a server that
// ignores the key, a clock stepped back) is still queried daily. The
// server is Stripe's: it forgets a key once it is "at least 24 hours old"
// (https://docs.stripe.com/idempotency: "We generate a new request if a
// key is reused after the original is pruned"); its result endpoint then
// answers 410 Gone (modelled, as result_gone_test.go's, on a server that
// tells a forgotten key from one it never saw). "Key expired" must not
// replace the reason: the person would read that the window merely ran
// out, and never learn that the payment found under the key was another
// request's, that a resend would charge again, or that the journal's
// times cannot be trusted. Nothing is resent either way: one submit, one
// payment.
func TestExpiredKeyKeepsEarlierReview(t *testing.T) {
	notFound := shape{status: http.StatusNotFound, body: `{"error":{"message":"not found"}}`}
	for _, tt := range []struct {
		name         string
		first, found shape
		// stepped: the client's clock ran 2h fast at the submit, and the
		// server went down after it; the clock is put right and the
		// server is back before the first Resume.
		stepped bool
		review  string
		kind    error
	}{
		{
			// A key space shared with another service: the result
			// endpoint answers, for the key, a payment of another amount.
			name:   "key in use",
			first:  shape{status: http.StatusBadGateway},
			found:  shape{status: http.StatusOK, body: `{"state":"succeeded","resourceId":"ord_other","amount":999}`},
			review: idem.ReviewKeyInUse,
			kind:   idem.ErrKeyConflict,
		},
		{
			// Solidgate's "Idempotency-Status: ignored" on an answer that
			// leaves open whether the charge ran
			// (https://api-docs.solidgate.com/api/v2/idempotent-requests).
			name: "key ignored",
			first: shape{status: http.StatusInternalServerError, header: http.Header{"Idempotency-Status": {"ignored"}},
				body: `{"error":{"code":"5.01","message":"internal error"}}`},
			found:  notFound,
			review: idem.ReviewKeyIgnored,
			kind:   idem.ErrNeedsReview,
		},
		{
			name:    "clock stepped",
			first:   shape{status: http.StatusBadGateway},
			found:   notFound,
			stepped: true,
			review:  idem.ReviewClockStepped,
			kind:    idem.ErrNeedsReview,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newExpiringServer(t, clock, idem.KeyRetentionStripe)
			srv.script(tt.first, tt.found, tt.stepped)
			clk := &skewedClock{Clock: clock}
			if tt.stepped {
				clk.offset.Store(int64(2 * time.Hour))
			}
			c := clientFor(t, srv.Server, clock, idem.WithClock(clk), idem.WithResultEndpoint("/operations/{key}"),
				idem.WithKeyRetention(idem.KeyRetentionStripe))

			_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/payment_intents", Body: []byte(`{"amount":100}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			if tt.stepped {
				// NTP puts the clock right: the send's journaled time now
				// lies in the future, and the key's age cannot be told.
				clk.offset.Store(0)
				srv.set(false)
				sum, err := c.Resume(t.Context())
				require.NoError(t, err)
				require.Equal(t, 1, sum.Review)
			}
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, tt.review, op.Review)

			// The daily recheck, past the server's window: 410.
			clock.Advance(idem.KeyRetentionStripe + time.Hour)
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, 1, sum.Review)
			op, err = c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, op.State)
			require.Equal(t, tt.review, op.Review, "the expiry hid why a person must look")

			// Do ends as the reason says, and resends nothing.
			_, err = c.Do(t.Context(), op)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.ErrorIs(t, err, tt.kind)
			submits, effects := srv.counts("k")
			require.Equal(t, 1, submits, "resent a key the server forgot")
			require.Equal(t, 1, effects, "charged twice")
			op, err = c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, tt.review, op.Review)
		})
	}
}
