package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Solidgate's endpoints differ in whether they de-duplicate by
// Idempotency-Key, and an answer says which: "Idempotency-Status:
// ignored" when the endpoint does not
// (https://api-docs.solidgate.com/api/v2/idempotent-requests). After an
// answer that leaves open whether the request executed, a resend with the
// same key is then a second request: it may charge again. The operation
// goes to a person instead, and stays there: not Resume, not the
// reconciler, not an explicit Do resends it.
func TestIgnoredKeyIsNeverResentAfterMaybeExecuted(t *testing.T) {
	ignored := http.Header{"Idempotency-Status": {"ignored"}}
	charged := shape{status: http.StatusCreated, body: `{"id":"pay_2","status":"settled"}`}
	for _, tt := range []struct {
		name  string
		first shape
	}{
		{"500", shape{status: http.StatusInternalServerError, header: ignored, body: `{"error":{"code":"5.01","message":"internal error"}}`}},
		{"503", shape{status: http.StatusServiceUnavailable, header: ignored, body: `{"error":{"code":"5.02","message":"service unavailable"}}`}},
		{"200 that does not decode", shape{status: http.StatusOK, header: ignored, body: `{"order":{"status":"processing"}}`}},
		{"202 still running", shape{status: http.StatusAccepted, header: ignored, body: `{"id":"pay_1","status":"processing"}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.first, charged)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			req := idem.Request{Key: "k", URL: v.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)}
			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			v.requireKeys(t, "Idempotency-Key", "k", 1)

			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, 1, sum.Review)
			requireDoSendsNothing(t, c, v, idem.ErrNeedsReview, "Idempotency-Key", 1)
		})
	}

	// An answer that says this request did not execute (429) leaves
	// nothing to duplicate: resent at once, as any throttled request.
	t.Run("429: resent", func(t *testing.T) {
		v := newVendor(t, shape{status: http.StatusTooManyRequests, header: ignored}, charged)
		res, err := v.submit(t)
		require.NoError(t, err)
		require.Equal(t, "pay_2", res.ResourceID)
		v.requireKeys(t, "Idempotency-Key", "k", 2)
	})
}
