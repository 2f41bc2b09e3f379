package idemtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// query asks the result endpoint about key and returns the status and body.
func query(t *testing.T, srv *idemtest.Server, key string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.ResultURL(key))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// sendUntil posts body with key like send, but gives up after d: it returns
// the error of a request the server did not answer in time.
func sendUntil(t *testing.T, srv *idemtest.Server, key, body string, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// clockedServer is a server on a manual clock, f injected.
func clockedServer(t *testing.T, f idemtest.Fault) (*idemtest.Clock, *idemtest.Server) {
	t.Helper()
	clock := idemtest.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	require.NoError(t, srv.Inject(f))
	return clock, srv
}

// TestStillRunningAnswersKeyInUseUntilItCommits: the first request times
// out while it runs; until the delay has passed by the server's clock
// every resend, the same body or another, gets Stripe's 409
// idempotency_key_in_use, naming the key as Stripe's message does, and the
// result endpoint 404; then it has committed, one order, and a resend gets
// that order's 201, replayed.
func TestStillRunningAnswersKeyInUseUntilItCommits(t *testing.T) {
	clock, srv := clockedServer(t, idemtest.Fault{Kind: idemtest.StillRunning, Key: "k", Delay: time.Minute})
	err := sendUntil(t, srv, "k", `{"amount":1}`, 50*time.Millisecond)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "the first request is not answered while it runs: %v", err)

	for _, body := range []string{`{"amount":1}`, `{"amount":2}`} {
		status, replayed, got := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, body)
		require.Equal(t, http.StatusConflict, status, body)
		require.Empty(t, replayed)
		require.JSONEq(t, `{"error":{"code":"idempotency_key_in_use","type":"idempotency_error","message":"There is currently another `+
			`in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still `+
			`going through): k. Please try again later."}}`, got, "Stripe names the key")
	}
	status, got := query(t, srv, "k")
	require.Equal(t, http.StatusNotFound, status, got)
	require.Zero(t, srv.KeyStats("", "k").SubmitsAfterFinal, "nothing was final while it ran")

	clock.Advance(time.Minute)
	status, got = query(t, srv, "k")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, got)
	status, replayed, got := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{"amount":1}`)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "true", replayed)
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, got)
	require.Equal(t, idemtest.KeyStats{Effects: 1, SubmitsAfterFinal: 1}, srv.KeyStats("", "k"))
	require.Equal(t, 1, srv.Stats().SideEffects)
}

// TestStillRunningAnswersOnceItHasRun: a client that waits gets the
// request's own answer, not replayed: the order, or the decline and no
// order.
func TestStillRunningAnswersOnceItHasRun(t *testing.T) {
	for _, tc := range []struct {
		kind    idemtest.FaultKind
		status  int
		body    string
		effects int
	}{
		{idemtest.StillRunning, http.StatusCreated, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, 1},
		{idemtest.StillRunningProcessing, http.StatusCreated, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, 1},
		{idemtest.StillRunningDecline, http.StatusPaymentRequired, `{"state":"failed","key":"k","reason":"card declined"}`, 0},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			srv, err := idemtest.NewServer()
			require.NoError(t, err)
			defer srv.Close()
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: tc.kind, Delay: 20 * time.Millisecond}))
			status, replayed, got := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{}`)
			require.Equal(t, tc.status, status)
			require.Empty(t, replayed)
			require.JSONEq(t, tc.body, got)
			require.Equal(t, tc.effects, srv.Effects("", "k"))
		})
	}
}

// TestLostAnswerLagDropsTheAnswerAndHidesTheOrder: the order commits, its
// answer is lost, the result endpoint answers 404 until the delay has
// passed since the commit; a resend meanwhile is the order's replay, not a
// second order.
func TestLostAnswerLagDropsTheAnswerAndHidesTheOrder(t *testing.T) {
	clock, srv := clockedServer(t, idemtest.Fault{Kind: idemtest.LostAnswerLag, Key: "k", Delay: time.Minute})
	err := sendUntil(t, srv, "k", `{}`, 10*time.Second)
	require.Error(t, err, "the answer is lost")
	require.False(t, errors.Is(err, context.DeadlineExceeded), "dropped, not held: %v", err)
	require.Equal(t, 1, srv.Effects("", "k"), "committed")

	clock.Advance(time.Minute - time.Second)
	status, got := query(t, srv, "k")
	require.Equal(t, http.StatusNotFound, status, got)
	status, replayed, got := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{}`)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "true", replayed)
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, got)

	clock.Advance(time.Second)
	status, got = query(t, srv, "k")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, got)
	require.Equal(t, 1, srv.Effects("", "k"))
	require.Equal(t, 1, srv.Stats().SideEffects)
	var faults []idemtest.FaultKind
	for _, r := range srv.Requests() {
		faults = append(faults, r.Fault)
	}
	require.Equal(t, []idemtest.FaultKind{idemtest.LostAnswerLag, "", "", ""}, faults)
}
