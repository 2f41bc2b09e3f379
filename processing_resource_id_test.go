package idem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The resource a result query names while it answers processing is the
// caller's to see with ErrUnknownOutcome and the journal's to keep (to
// show, to look up, to Confirm by LookupResource), and what the
// operation settles with once the query answers succeeded. A payment the
// processor has not finished is answered with its id and state: Stripe's
// PaymentIntent stays "processing" with its id
// (https://docs.stripe.com/payments/payment-intents/verifying-status);
// stuckServer's result endpoint answers so, its submits after the first
// (whose answer is lost) Stripe's 409 in progress.
func TestProcessingQueryKeepsTheResourceID(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	s := newStuckServer(t, clock, `{"state":"processing","resourceId":"ord_1"}`)
	c := clientFor(t, s.srv, clock, idem.WithResultEndpoint(s.srv.URL+"/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: stuckKey, URL: s.srv.URL + "/v1/payments", Body: []byte(stuckRequest)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateProcessing, res.State)
	require.Equal(t, "ord_1", res.ResourceID, "the Result returned with ErrUnknownOutcome")
	op, err := c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
	require.NoError(t, err)
	require.Equal(t, "ord_1", resourceOf(op), "journaled")
	found, err := c.LookupResource(t.Context(), "", "ord_1")
	require.NoError(t, err, "an event naming ord_1 finds the operation")
	require.Equal(t, stuckKey, found.Key)

	// A later processing answer that names nothing keeps what was said.
	s.setQuery(`{"state":"processing"}`)
	clock.Advance(10 * time.Minute)
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	op, err = c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
	require.NoError(t, err)
	require.Equal(t, idem.StateProcessing, op.State)
	require.Equal(t, "ord_1", resourceOf(op), "kept through an answer naming none")

	s.setQuery(`{"state":"succeeded","resourceId":"ord_1"}`)
	clock.Advance(10 * time.Minute)
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	op, err = c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, "ord_1", resourceOf(op))
	require.Empty(t, op.Review)
	require.Equal(t, 1, s.submits(), "submits: the result endpoint answers")
	s.requireOneOrder(t, stuckKey, stuckRequest)
}

// A result query that, having named ord_1 in processing, names another
// resource for the key has the server holding two: flagged
// ReviewMadeTwice as a submit's answer naming another is, not settled
// over the first, and never resent.
func TestProcessingQueryThenAnotherResource(t *testing.T) {
	for _, later := range []string{
		`{"state":"processing","resourceId":"ord_2"}`,
		`{"state":"succeeded","resourceId":"ord_2"}`,
	} {
		t.Run(later, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			s := newStuckServer(t, clock, `{"state":"processing","resourceId":"ord_1"}`)
			c := clientFor(t, s.srv, clock, idem.WithResultEndpoint(s.srv.URL+"/operations/{key}"))
			_, err := c.Submit(t.Context(), idem.Request{Key: stuckKey, URL: s.srv.URL + "/v1/payments", Body: []byte(stuckRequest)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			s.setQuery(later)
			clock.Advance(10 * time.Minute)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
			require.NoError(t, err)
			require.Equal(t, idem.ReviewMadeTwice, op.Review)
			require.Equal(t, 1, s.submits(), "submits: the result endpoint answers")
			s.requireOneOrder(t, stuckKey, stuckRequest)
		})
	}
}

// resourceOf is the resource op's result names, "" when it has none.
func resourceOf(op *idem.Operation) string {
	if op.Result == nil {
		return ""
	}
	return op.Result.ResourceID
}
