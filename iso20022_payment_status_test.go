package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Open banking APIs name a payment's status with the ISO 20022 codes of
// pain.002 in its "status": Bridge's payment requests and transactions
// are CREA or ACTC while created, PDNG once initiated, ACSC once
// executed and RJCT when "the payment has failed"
// (docs.bridgeapi.io/docs/payment-requests-and-transactions-statuses). A
// rejected payment's RJCT was none of DecodeJSON's words, so it read as
// created: the call succeeded, and a checkout shipped what no one paid
// for. RJCT is failed, with its status as the reason; the other codes
// are the payment's creation, as any status a created resource reaches.
func TestISO20022PaymentStatus(t *testing.T) {
	for _, tt := range []struct {
		status string
		state  idem.State
	}{
		{"RJCT", idem.StateFailed},
		{"CREA", idem.StateSucceeded},
		{"ACTC", idem.StateSucceeded},
		{"PDNG", idem.StateSucceeded},
		{"ACSP", idem.StateSucceeded},
		{"ACSC", idem.StateSucceeded},
	} {
		t.Run(tt.status, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusCreated,
				body: `{"id":"a2b5d6e0-c8b2-4a5e-9b1d-7c0e2f3a4b5c","status":"` + tt.status + `","amount":100,"currency":"EUR"}`})
			res, err := v.submit(t)
			require.Equal(t, tt.state, res.State, "err: %v", err)
			if tt.state == idem.StateFailed {
				require.ErrorIs(t, err, idem.ErrFailed)
				require.Contains(t, res.Reason, tt.status)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, "a2b5d6e0-c8b2-4a5e-9b1d-7c0e2f3a4b5c", res.ResourceID)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}
