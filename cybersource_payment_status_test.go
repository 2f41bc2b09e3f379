package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// cybersourcePayments is Cybersource's REST payments endpoint, POST
// /pts/v2/payments, which answers every payment it processed 201 Created
// with the payment's "id" and a "status" that is one of "AUTHORIZED,
// PARTIAL_AUTHORIZED, AUTHORIZED_PENDING_REVIEW, AUTHORIZED_RISK_DECLINED,
// PENDING_AUTHENTICATION, PENDING_REVIEW, DECLINED, INVALID_REQUEST"
// (PtsV2PaymentsPost201Response, CyberSource/cybersource-rest-client-node
// docs/PtsV2PaymentsPost201Response.md), the refusal's reason in
// "errorInformation" (DECISION_PROFILE_REJECT, "emitted when Decision
// Manager … REJECTS the order"; PtsV2PaymentsPost201ResponseErrorInformation.md).
// The body below is modelled on those models.
type cybersourcePayments struct {
	srv    *httptest.Server
	status string // the status every payment gets

	mu    sync.Mutex
	posts int
}

func newCybersourcePayments(t testing.TB, status string) *cybersourcePayments {
	t.Helper()
	p := &cybersourcePayments{status: status}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.posts++
		p.mu.Unlock()
		refusal := ""
		switch status {
		case "AUTHORIZED_RISK_DECLINED":
			refusal = `"errorInformation":{"reason":"DECISION_PROFILE_REJECT","message":"Decision Profile reject"},`
		case "INVALID_REQUEST":
			refusal = `"errorInformation":{"reason":"INVALID_MERCHANT_CONFIGURATION","message":"Invalid merchant configuration"},`
		}
		w.Header().Set("Content-Type", "application/hal+json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"_links":{"self":{"href":"/pts/v2/payments/7001234567890123456789","method":"GET"}},`+
			`"id":"7001234567890123456789","submitTimeUtc":"2026-12-01T10:20:30Z","status":%q,"reconciliationId":"70012345678",%s`+
			`"clientReferenceInformation":{"code":"ord-7"},"processorInformation":{"approvalCode":"888888","responseCode":"100"},`+
			`"orderInformation":{"amountDetails":{"authorizedAmount":"102.21","currency":"USD"}}}`, status, refusal)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// Cybersource answers a payment Decision Manager rejected after the issuer
// approved it 201 AUTHORIZED_RISK_DECLINED, and one it could not process
// 201 INVALID_REQUEST. DecodeJSON took any status it did not know for a
// payment made: both settled succeeded, and the caller shipped an order
// no one paid for (the rejected one's authorisation is reversed: "In case
// DM is enabled for a particular payment method and transaction is
// rejected after authorization with response reason
// (AUTHORIZED_RISK_DECLINED). Authorization Reversal will be triggered
// automatically.", CyberSource/cybersource-plugins-oraclecxcommerce
// documentation/business-services/decision-manager.md). Both are failed,
// sent once and never again; the statuses of a payment made, or held for
// review, stay succeeded.
func TestCybersourceRefusedPaymentIsFailed(t *testing.T) {
	for _, tt := range []struct {
		status string
		state  idem.State
		kinds  []error
	}{
		{"AUTHORIZED_RISK_DECLINED", idem.StateFailed, []error{idem.ErrFailed}},
		{"INVALID_REQUEST", idem.StateFailed, []error{idem.ErrFailed}},
		{"DECLINED", idem.StateFailed, []error{idem.ErrFailed}},
		{"AUTHORIZED", idem.StateSucceeded, nil},
		{"PARTIAL_AUTHORIZED", idem.StateSucceeded, nil},
		{"AUTHORIZED_PENDING_REVIEW", idem.StateSucceeded, nil},
	} {
		t.Run(tt.status, func(t *testing.T) {
			p := newCybersourcePayments(t, tt.status)
			c := clientFor(t, p.srv, idemtest.NewClock(epoch))
			req := idem.Request{Key: "ord-7-pay", URL: p.srv.URL + "/pts/v2/payments",
				Body: []byte(`{"clientReferenceInformation":{"code":"ord-7"},"orderInformation":{"amountDetails":{"totalAmount":"102.21","currency":"USD"}}}`)}

			res, err := c.Submit(t.Context(), req)
			requireOutcome(t, res, err, tt.state, tt.kinds, "7001234567890123456789", "")
			if tt.state == idem.StateFailed {
				require.Equal(t, tt.status, res.Reason)
			}
			op, lerr := c.Lookup(t.Context(), "", req.Key)
			require.NoError(t, lerr)
			require.Equal(t, tt.state, op.State, "journaled state")

			again, err := c.Submit(t.Context(), req)
			requireOutcome(t, again, err, tt.state, tt.kinds, "7001234567890123456789", "")
			p.mu.Lock()
			defer p.mu.Unlock()
			require.Equal(t, 1, p.posts, "payments asked for: a settled one is never sent again")
		})
	}
}
