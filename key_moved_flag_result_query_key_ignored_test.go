package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// An endpoint that ignores the key (keyIgnoringCharges, modelled on
// Solidgate's) charged each of release 1's sends of a payment, every
// answer lost. A replica on release 2's settings (the key's header
// renamed) visits it before any answer has taught it the endpoint:
// flagged ReviewKeyMoved, nothing sent. It then learns the endpoint from
// another payment, and a visit, by that replica or by a Client on the
// journaled settings, queries the order's status, which tells of one
// payment. The resend blocked as the endpoint's, the flag ReviewKeyIgnored
// was left out, as the record was flagged already: the query settled it
// succeeded with no review, several charges recorded as one. The
// settlement keeps ReviewMaybeTwice.
func TestKeyMovedFlagResultQueryKeyIgnoredKeepsMaybeTwice(t *testing.T) {
	for _, journaled := range []bool{false, true} {
		t.Run(map[bool]string{false: "renamed replica visits", true: "journaled settings visit"}[journaled], func(t *testing.T) {
			keyMovedFlagResultQueryKeyIgnored(t, journaled)
		})
	}
}

// newLostThenIgnoredCreated is keyIgnoringCharges losing every answer
// while lost is set (each send charged all the same), then answering
// ignoredCreated.
func newLostThenIgnoredCreated(t *testing.T) (*keyIgnoringCharges, *atomic.Bool) {
	lost := new(atomic.Bool)
	lost.Store(true)
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if lost.Load() {
			dropConnection(w)
			return
		}
		ignoredCreated(n, w)
	})
	return s, lost
}

func keyMovedFlagResultQueryKeyIgnored(t *testing.T, journaled bool) {
	ctx := context.Background()
	s, clock, release, resume, sends := keyMovedThenLearnt(t)
	clock.Advance(time.Minute)
	resume(!journaled)
	require.Equal(t, sends, len(s.charged()), "k sent again")
	release(journaled, func(c *idem.Client) {
		op, err := c.Lookup(ctx, "", "k")
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, op.State)
		require.Equal(t, idem.ReviewMaybeTwice, op.Review, "the other sends may have charged")
	})
}

// keyMovedThenLearnt journals payment "k" whose every send release 1
// made was charged, answers lost; a renamed replica flags it
// ReviewKeyMoved, then learns the endpoint from payment "k0". release
// opens a Client on the journal (renamed: release 2's settings; more
// options after them), resume
// runs its Resume; sends is how many charges "k" made.
func keyMovedThenLearnt(t *testing.T) (s *keyIgnoringCharges, clock *idemtest.Clock, release func(bool, func(*idem.Client), ...idem.Option), resume func(bool), sends int) {
	ctx := context.Background()
	s, lost := newLostThenIgnoredCreated(t)
	clock = idemtest.NewClock(epoch)
	path := filepath.Join(t.TempDir(), "idem.journal")
	release = func(renamed bool, fn func(*idem.Client), more ...idem.Option) {
		st, err := journal.Open(path)
		require.NoError(t, err)
		opts := []idem.Option{idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock)}
		if renamed {
			opts = append(opts, idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare))
		}
		c, err := idem.New(st, append(opts, more...)...)
		require.NoError(t, err)
		fn(c)
		require.NoError(t, c.Close())
		require.NoError(t, st.Close())
	}
	resume = func(renamed bool) {
		release(renamed, func(c *idem.Client) {
			_, err := c.Resume(ctx)
			require.NoError(t, err)
		})
	}

	release(false, func(c *idem.Client) {
		_, err := c.Submit(ctx, idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
			Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	})
	sends = len(s.charged())
	require.Greater(t, sends, 1, "release 1's sends, each a charge")
	clock.Advance(time.Minute)
	resume(true)
	lost.Store(false)
	release(true, func(c *idem.Client) {
		_, err := c.Submit(ctx, idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":5,"order_id":"o-0"}`)})
		require.NoError(t, err)
		op, err := c.Lookup(ctx, "", "k")
		require.NoError(t, err)
		require.Equal(t, idem.ReviewKeyMoved, op.Review)
	})
	s.answerFrom(1, orderStatus("pay_2", "settled"))
	return s, clock, release, resume, sends
}
