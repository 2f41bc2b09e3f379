package idem_test

// Outcome-table rows beyond TestOutcomeTable: answers that say nothing
// about whether the operation executed (odd status codes, a refused resend
// after an attempt that may have executed) never settle it as failed.

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Outcome table: 3xx, 1xx (101) and out-of-range status codes may follow
// an executed create. Redirects are never followed (a redirected POST loses
// its body); the answer is ambiguous, so the result endpoint is asked and
// nothing is executed twice.
func TestOddStatusCodesAreAmbiguous(t *testing.T) {
	for _, status := range []int{http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusSwitchingProtocols, 599, 999} {
		t.Run(http.StatusText(status)+"_"+strconv.Itoa(status), func(t *testing.T) {
			e := newEnv(t, script(step{forward: true, status: status, header: http.Header{"Location": {"/elsewhere"}}}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":1}`))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Len(t, e.submits("k"), 1)
			require.Equal(t, 1, e.queries("k"))
			require.Equal(t, 1, e.srv.Effects(scope, "k"))
			for _, r := range e.srv.Requests() {
				require.NotEqual(t, "/elsewhere", r.Path, "redirect followed")
			}
		})
	}
}

// Contract (the problem statement, promise 3): when idem cannot tell what
// happened it says "unknown"; it never marks failed what may have executed.
// Attempt 1 reached the server and executed (a gateway answered 502). The
// resend with the same key is refused by an auth layer (401: the credential
// the request hook adds expired meanwhile). That 401 says nothing about
// attempt 1, yet the operation was settled failed: the caller, told
// ErrFailed, would retry under a new key and pay twice.
func TestRejectedResendAfterMaybeExecutedIsNotFailed(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			e := newEnv(t, noResultEndpoint(),
				script(step{forward: true, status: http.StatusBadGateway}, step{status: status}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "the order was executed once")
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.NotEqual(t, idem.StateFailed, res.State, "an executed order is journaled failed")
		})
	}
}

// Same, with a result endpoint that lags (404 is not "never happened").
func TestRejectedResendAfterQueryLagIsNotFailed(t *testing.T) {
	e := newEnv(t, script(step{forward: true, status: http.StatusBadGateway}, step{status: http.StatusForbidden}))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: "k", Delay: time.Hour}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateFailed, res.State)
}
