package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// The endpoint de-duplicates by the key from the start, as Stripe's do
// ("Stripe's idempotency works by saving the resulting status code and
// body of the first request made for any given idempotency key [...].
// Subsequent requests with the same key return the same result",
// https://docs.stripe.com/idempotency), and never says it ignores it.
// Payment a's answer is lost; an operator then forgets that endpoint as
// ignoring the key (a typo of the one meant, the wrong one of several
// per-path endpoints). It was never known: the forget flagged a
// ReviewKeyIgnored all the same, and Resume learnt the endpoint from
// that flag, a de-duplicating endpoint turned into one ignoring the key
// (its next lost answers left for a person), a never resent while the
// forget answered "not known". An endpoint not known flags nothing:
// Resume resends a under a and the endpoint answers with a's payment;
// requests a, a; 1 charge; nothing listed as ignoring the key. So for
// the tool's RemoveKeyIgnoring on the journal.
func TestForgetUnknownKeyIgnoringEndpointFlagsNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(t *testing.T, c *idem.Client, endpoint string) bool
	}{
		{"ForgetKeyIgnoring", func(t *testing.T, c *idem.Client, endpoint string) bool {
			known, err := c.ForgetKeyIgnoring(t.Context(), endpoint)
			require.NoError(t, err, "ForgetKeyIgnoring()")
			return known
		}},
		{"RemoveKeyIgnoring", func(t *testing.T, c *idem.Client, endpoint string) bool {
			removed, flagged, err := idem.RemoveKeyIgnoring(t.Context(), c.Store(), endpoint)
			require.NoError(t, err, "RemoveKeyIgnoring()")
			require.Zero(t, flagged, "RemoveKeyIgnoring(): flagged")
			return removed
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFixedAfterIncident(t)
			s.fix() // de-duplicates from the start
			c := clientFor(t, s.srv, idemtest.NewClock(epoch))
			charge := s.srv.URL + "/api/v1/charge"

			s.submitLost(t, c, "a", charge, `{"amount":100}`)
			require.False(t, tc.forget(t, c, "POST "+charge), "forget: known")
			a, err := c.Store().Get(t.Context(), idem.DefaultScope, "a")
			require.NoError(t, err)
			require.Empty(t, a.Review, "journal: a's Review after the forget")

			sum, err := c.Resume(t.Context())
			require.NoError(t, err, "Resume()")
			require.Equal(t, 1, sum.Succeeded, "Resume(): a settled")
			s.requireSeen(t, []string{"a", "a"}, 1)
			a, err = c.Store().Get(t.Context(), idem.DefaultScope, "a")
			require.NoError(t, err)
			require.Equal(t, journal.StateSucceeded, a.State, "journal: a's State")
			require.Equal(t, "pay_1", a.Result.ResourceID, "journal: a's payment")
			require.Empty(t, a.Review, "journal: a's Review")
			es, err := c.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, err)
			require.Empty(t, es, "KeyIgnoringEndpoints()")
		})
	}
}
