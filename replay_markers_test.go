package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Servers other than Stripe mark a replay with headers of their own. A
// replayed success to an operation nothing of which can have executed is
// another request's: taking it as ours would report an order placed that
// never was.
func TestReplayMarkerVariants(t *testing.T) {
	t.Run("fresh answer marked false: settles", func(t *testing.T) {
		v := newVendor(t, shape{status: 201, header: http.Header{"X-Idempotency-Replayed": {"false"}}, body: `{"id":"ord_1"}`})
		res, err := v.submit(t)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "ord_1", res.ResourceID)
		require.False(t, res.Replayed)
		require.Equal(t, 1, v.posts(), "submits")
	})
	for _, h := range []http.Header{
		{"Idempotent-Replayed": {"true"}},
		{"Idempotency-Replayed": {"true"}},
		{"X-Idempotency-Replayed": {"true"}},
		{"X-Idempotent-Replayed": {"true"}},
		{"X-Idempotency-Replayed": {`"true"`}},
	} {
		for name, val := range h {
			t.Run(name+"="+val[0], func(t *testing.T) {
				v := newVendor(t, shape{status: 201, header: h, body: `{"id":"ord_someone_elses"}`})
				res, err := v.submit(t)
				requireForeignKey(t, res, err)
				v.requireKeys(t, "Idempotency-Key", "k", 1)
			})
		}
	}
}
