package idem_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Run is often the first to learn that an order needs a person: the call
// that sent it lost its answer (a gateway's 502) while the server went
// down, and the worker running Run was away for the day. The server is
// Stripe's: "You can remove keys from the system automatically after
// they're at least 24 hours old. We generate a new request if a key is
// reused after the original is pruned"
// (https://docs.stripe.com/idempotency); its result endpoint then answers
// 410 Gone (modelled, as result_gone_test.go's). Or, back within the day,
// the endpoint names another request's payment under the key (a key space
// shared with another service: modelled, as expired_key_keeps_review_test.go's).
// Run's query flags the order; the query's own commit wrote the reason,
// and flag() took its first flagging for a recheck of a reason already
// told: "flagged for review" at Debug, nothing at Warn, a person reading
// the logs never told. The daily rechecks after it (the 410 again, which
// keeps "key in use": reviewAfter) are routine: Debug. One warning, one
// Review hook, one submit, one payment.
func TestRunWarnsWhenItFirstFlags(t *testing.T) {
	other := shape{status: http.StatusOK, body: `{"state":"succeeded","resourceId":"ord_other","amount":999}`}
	for _, tt := range []struct {
		name   string
		found  shape
		away   time.Duration // the worker running Run is away this long
		review string
	}{
		{name: "key forgotten", away: idem.KeyRetentionStripe + time.Hour, review: idem.ReviewKeyExpired},
		{name: "another request's payment", found: other, review: idem.ReviewKeyInUse},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newExpiringServer(t, clock, idem.KeyRetentionStripe)
			srv.script(shape{}, tt.found, true)
			logs := &logCapture{}
			var reviews atomic.Int32
			c := clientFor(t, srv.Server, clock, idem.WithResultEndpoint("/operations/{key}"),
				idem.WithKeyRetention(idem.KeyRetentionStripe), idem.WithLogger(slog.New(logs)),
				idem.WithHooks(idem.Hooks{Review: func(context.Context, *idem.Result) { reviews.Add(1) }}))

			_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/payment_intents", Body: []byte(`{"amount":100}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			clock.Advance(tt.away)
			srv.set(false)
			e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
			runUntil(t, e, clock.Now().Add(time.Hour))
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, op.State)
			require.Equal(t, tt.review, op.Review)
			require.Equal(t, []slog.Level{slog.LevelWarn}, flagLevels(logs), "Run's first flagging of the order")

			// Two days of daily rechecks, the key forgotten by then.
			runUntil(t, e, clock.Now().Add(2*idem.KeyRetentionStripe+time.Hour))
			op, err = c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, tt.review, op.Review)
			levels := flagLevels(logs)
			require.GreaterOrEqual(t, len(levels), 3, "rechecks: %v", levels)
			require.Equal(t, slog.LevelWarn, levels[0])
			for i, l := range levels[1:] {
				require.Equalf(t, slog.LevelDebug, l, "recheck %d", i+1)
			}
			require.EqualValues(t, 1, reviews.Load(), "Review hook calls")
			submits, effects := srv.counts("k")
			require.Equal(t, 1, submits, "resent a key the server forgot")
			require.Equal(t, 1, effects, "charged twice")
		})
	}
}

// flagLevels is the level of each "flagged for review" record logs holds.
func flagLevels(logs *logCapture) []slog.Level {
	levels, _ := logs.find("idem: flagged for review")
	return levels
}
