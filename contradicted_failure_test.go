package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// requireContradicted asserts what a caller is told of an operation
// settled failed while evidence says it may have executed: not ErrFailed,
// which invites a retry under a new key (a second charge), but an error
// for a person (ErrNeedsReview) that still says the outcome is open
// (ErrUnknownOutcome: never retry under a new key).
func requireContradicted(t testing.TB, res *idem.Result, err error, review string) {
	t.Helper()
	require.Error(t, err)
	require.NotErrorIs(t, err, idem.ErrFailed, "a failure a person must still settle is not one to retry anew")
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	var e *idem.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, idem.StateFailed, e.State, "the journal's state, as settled")
	require.NotNil(t, res)
	require.Equal(t, idem.StateFailed, res.State)
	require.Equal(t, review, res.Review)
}

// Adyen does not check a merchantReference for uniqueness, so with the key
// carried there an AUTHORISATION notification for another payment of the
// same order (the shopper's earlier card, refused: success "false") can
// reach Confirm while our /payments request is on the wire
// (https://docs.adyen.com/development-resources/webhooks/webhook-types/).
// Confirm settles the open operation failed; our request then authorises.
// The Submit used to return ErrFailed, and a checkout retries a failed
// payment under a new key: a second authorisation.
func TestWebhookFailureContradictedByAnswer(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, counts.options())
	tr := &confirmOnSend{base: e.srv.Client().Transport}
	c, err := idem.New(e.store, append(e.baseOpts(), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	tr.confirm = func() error {
		_, err := c.Confirm(context.Background(), "", "k", idem.Confirmation{
			State: idem.StateFailed, ResourceID: "psp_refused", Source: "adyen", EventID: "psp_refused:AUTHORISATION:false", Reason: "Refused",
		})
		return err
	}
	res, err := c.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.NoError(t, tr.err, "Confirm() while the request was on the wire")

	requireContradicted(t, res, err, idem.ReviewConfirmConflict)
	require.Equal(t, http.StatusCreated, res.StatusCode, "the server's answer")
	require.Contains(t, string(res.Body), "ord_000001")
	require.Len(t, e.submits("k"), 1)
	require.Zero(t, e.queries("k"))
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "payments")

	rec := e.record("k")
	require.Equal(t, idem.StateFailed, rec.State, "the confirmation's settlement is kept")
	require.Equal(t, idem.ReviewConfirmConflict, rec.Review)
	require.Len(t, rec.Confirmations, 2, "the event, then the server's answer")
	require.Equal(t, journal.ConfirmConflicted, rec.Confirmations[1].Effect)
	require.Equal(t, 1, counts.get(counts.conflict, "k"), "ConfirmConflict hook calls")
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls")
}

// On an endpoint that does not de-duplicate by the key (Solidgate says so
// with "Idempotency-Status: ignored",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), a first
// copy whose answer was lost charged the card; idem's resend was a new
// payment, and the issuer declined it (the first took the funds). The
// answer settles the operation failed and flags it ReviewMaybeTwice, but
// the call returned ErrFailed: the checkout asked the customer to pay
// again, a second charge beside the one already taken.
func TestDeclineAfterMaybeExecutedCopyIsNotAFailure(t *testing.T) {
	var (
		mu      sync.Mutex
		keys    []string
		charged int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		first := len(keys) == 1
		if first {
			charged++
		}
		mu.Unlock()
		if first {
			// Charged, and the answer lost.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"id":"pay_2","status":"declined","reason":"insufficient funds"}`)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)})
	requireContradicted(t, res, err, idem.ReviewMaybeTwice)
	mu.Lock()
	require.Equal(t, []string{"k", "k"}, keys, "requests by key")
	require.Equal(t, 1, charged, "charges")
	mu.Unlock()

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, op.State)
	require.Equal(t, idem.ReviewMaybeTwice, op.Review)
}
