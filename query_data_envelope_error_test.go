package idem_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// An API that wraps every answer in a lone "data" object (Circle's
// {"data":{"id":…,"status":"pending",…}},
// developers.circle.com/api-reference/circle-mint/payments/create-payment;
// Paddle's beside a "meta") and answers a query's error 200 OK inside it
// (modelled: {"data":{"error":{…}}}) says nothing of the order, as
// DecodeJSON reads it: an answer that carries an error. Read at the top
// only, it was a search that found nothing, and once DefaultResultLag had
// passed the client order id was sent again and the order placed twice.
// It is a failed query, asked again until it answers.
func TestDataEnvelopeErrorToAResultQueryIsNoAnswerAboutTheOrder(t *testing.T) {
	for _, body := range []string{
		`{"data":{"error":{"code":"rate_limited","message":"Too many requests, try again later"}}}`,
		`{"data":{"success":false,"message":"Service busy"},"meta":{"request_id":"r-1"}}`,
	} {
		t.Run(body, func(t *testing.T) {
			x := &bybitOrders{queryFails: slices.Repeat([]string{body}, 50)}
			clock := idemtest.NewClock(epoch)
			c, _, err := x.submit(t, clock)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			clock.Advance(idem.DefaultResultLag)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
			require.NoError(t, err)
			require.NotEqual(t, idem.StateSucceeded, op.State)

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Less(t, len(x.queryFails), 50, "queries asked")
			require.Equal(t, []string{"ord-9"}, x.orders, "orders")
			require.Equal(t, 1, x.creates, "creates")
		})
	}
}
