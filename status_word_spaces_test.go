package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A status word with spaces around it (" RJCT", "declined\n", a fixed-width
// column's "failed   ") is the same word: read as another, a rejected
// payment was taken as made, and a "state" still " processing" as a
// resource created.
func TestStatusWordWithSpaces(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		code       int
		want       idem.Outcome
	}{
		{"RJCT", `{"id":"p_1","status":" RJCT"}`, http.StatusCreated,
			idem.Outcome{State: idem.StateFailed, ResourceID: "p_1", Reason: " RJCT"}},
		{"declined", `{"id":"p_1","status":"declined\n"}`, http.StatusCreated,
			idem.Outcome{State: idem.StateFailed, ResourceID: "p_1", Reason: "declined\n"}},
		{"running", `{"id":"op_1","status":" Running "}`, http.StatusOK,
			idem.Outcome{State: idem.StateProcessing, ResourceID: "op_1"}},
		{"done in a 202", `{"id":"p_1","status":"captured "}`, http.StatusAccepted,
			idem.Outcome{State: idem.StateSucceeded, ResourceID: "p_1"}},
		{"state failed", `{"state":"failed ","id":"p_1"}`, http.StatusOK,
			idem.Outcome{State: idem.StateFailed, ResourceID: "p_1"}},
		{"state processing", `{"state":" processing","id":"job_1"}`, http.StatusOK,
			idem.Outcome{State: idem.StateProcessing}},
		{"state failed beside its error", `{"state":"failed ","error":{"message":"card declined"},"id":"p_1"}`, http.StatusOK,
			idem.Outcome{State: idem.StateFailed, ResourceID: "p_1"}},
		// Shopify's transaction statuses are pending, failure, success and
		// error (shopify.dev/docs/api/admin-rest/latest/resources/transaction);
		// PayU India's verify_payment says "failure" too.
		{"failure", `{"id":"389404469","status":"failure"}`, http.StatusCreated,
			idem.Outcome{State: idem.StateFailed, ResourceID: "389404469", Reason: "failure"}},
		{"berlin group RJCT", `{"transactionStatus":"RJCT ","paymentId":"p_1"}`, http.StatusCreated,
			idem.Outcome{State: idem.StateFailed, ResourceID: "p_1", Reason: "RJCT "}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: tt.code, Body: []byte(tt.body)})
			require.NoError(t, err)
			require.Equal(t, tt.want, out)
		})
	}
}

// Sent to a server, a rejected payment whose status has a space before
// it fails at once, sent once, never taken as a payment made.
func TestRejectedStatusWithSpaceSentOnce(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusCreated, body: `{"id":"a2b5d6e0","status":" RJCT","amount":100,"currency":"EUR"}`})
	res, err := v.submit(t)
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Equal(t, "a2b5d6e0", res.ResourceID)
	v.requireKeys(t, "Idempotency-Key", "k", 1)
}
