package idemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// faultsAndStatuses returns the fault and status of every request srv
// logged, in arrival order.
func faultsAndStatuses(srv *idemtest.Server) ([]idemtest.FaultKind, []int) {
	var faults []idemtest.FaultKind
	var statuses []int
	for _, r := range srv.Requests() {
		faults = append(faults, r.Fault)
		statuses = append(statuses, r.Status)
	}
	return faults, statuses
}

// TestStillRunningDeclineAnswersKeyInUseThenTheDecline: the request runs
// past its client's timeout, then is declined. While it runs a resend
// gets Stripe's 409 and the result endpoint 404; once it has run, the
// result endpoint says failed and a resend gets the 402, replayed. No
// order, ever.
func TestStillRunningDeclineAnswersKeyInUseThenTheDecline(t *testing.T) {
	clock, srv := clockedServer(t, idemtest.Fault{Kind: idemtest.StillRunningDecline, Key: "k", Delay: time.Minute})
	err := sendUntil(t, srv, "k", `{"amount":1}`, 50*time.Millisecond)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "the first request is not answered while it runs: %v", err)

	status, replayed, got := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{"amount":1}`)
	require.Equal(t, http.StatusConflict, status)
	require.Empty(t, replayed)
	require.Contains(t, got, `"code":"idempotency_key_in_use"`)
	status, got = query(t, srv, "k")
	require.Equal(t, http.StatusNotFound, status, got)

	clock.Advance(time.Minute)
	status, got = query(t, srv, "k")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"state":"failed","key":"k","reason":"card declined"}`, got)
	status, replayed, got = send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{"amount":1}`)
	require.Equal(t, http.StatusPaymentRequired, status)
	require.Equal(t, "true", replayed)
	require.JSONEq(t, `{"state":"failed","key":"k","reason":"card declined"}`, got)

	require.Equal(t, idemtest.KeyStats{SubmitsAfterFinal: 1}, srv.KeyStats("", "k"), "no order")
	require.Zero(t, srv.Stats().SideEffects)
	faults, _ := faultsAndStatuses(srv)
	require.Equal(t, []idemtest.FaultKind{idemtest.StillRunningDecline, "", "", "", ""}, faults)
}

// TestStillRunningProcessingShowsProcessingWhileItRuns: the result
// endpoint answers 200 processing, with no resource yet, while the
// request runs (a resend meanwhile gets the 409), then the order.
func TestStillRunningProcessingShowsProcessingWhileItRuns(t *testing.T) {
	clock, srv := clockedServer(t, idemtest.Fault{Kind: idemtest.StillRunningProcessing, Key: "k", Delay: time.Minute})
	err := sendUntil(t, srv, "k", `{}`, 50*time.Millisecond)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "the first request is not answered while it runs: %v", err)

	status, got := query(t, srv, "k")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"state":"processing","key":"k"}`, got)
	status, _, got = send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{}`)
	require.Equal(t, http.StatusConflict, status, got)

	clock.Advance(time.Minute)
	status, got = query(t, srv, "k")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, got)
	status, replayed, got := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{}`)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "true", replayed)
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k"}`, got)
	require.Equal(t, 1, srv.Effects("", "k"))
	require.Equal(t, 1, srv.Stats().SideEffects)
}

// TestStillRunningWebhookIsSentOnceItCommits: no event tells of the
// order while the request runs (it may yet fail); once it commits by the
// server's clock, one event with its outcome, dated at the commit.
func TestStillRunningWebhookIsSentOnceItCommits(t *testing.T) {
	for _, tc := range []struct {
		kind  idemtest.FaultKind
		event string
	}{
		{idemtest.StillRunning, "order.succeeded"},
		{idemtest.StillRunningDecline, "order.failed"},
		{idemtest.StillRunningProcessing, "order.succeeded"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			var mu sync.Mutex
			var got []idemtest.WebhookEvent
			receiver := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				var ev idemtest.WebhookEvent
				_ = json.NewDecoder(r.Body).Decode(&ev)
				mu.Lock()
				got = append(got, ev)
				mu.Unlock()
			}))
			t.Cleanup(receiver.Close)
			start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
			clock := idemtest.NewClock(start)
			srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now),
				idemtest.WithWebhook(idemtest.Webhook{URL: receiver.URL, Secret: []byte("whsec_test")}))
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: tc.kind, Key: "k", Delay: time.Minute}))

			err = sendUntil(t, srv, "k", `{"metadata":{"idem_key":"k"}}`, 50*time.Millisecond)
			require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
			require.NoError(t, srv.FlushWebhooks(t.Context()))
			require.Zero(t, srv.WebhookStats().Events, "nothing committed yet")
			clock.Advance(time.Minute - time.Second)
			require.NoError(t, srv.FlushWebhooks(t.Context()))
			require.Zero(t, srv.WebhookStats().Events, "still running")

			clock.Advance(time.Second)
			require.NoError(t, srv.FlushWebhooks(t.Context()))
			require.Equal(t, idemtest.WebhookStats{Events: 1, Delivered: 1}, srv.WebhookStats())
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, got, 1)
			require.Equal(t, tc.event, got[0].Type)
			require.JSONEq(t, `{"idem_key":"k"}`, string(got[0].Metadata))
			require.Equal(t, start.Add(time.Minute).Unix(), got[0].Created, "dated at the commit")
		})
	}
}

// TestAnswerHeldPastTheClientsTimeoutIsLoggedUnanswered: Request.Status
// is what reached the client, 0 when none did. A delay-response whose
// client gave up was logged 201, an answer nobody received.
func TestAnswerHeldPastTheClientsTimeoutIsLoggedUnanswered(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: "k", Delay: time.Hour}))
	err = sendUntil(t, srv, "k", `{}`, 50*time.Millisecond)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	// The held answer's handler ends once it sees its client gone; the
	// key is then no longer in flight and a resend is the replay.
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, replayed, _ := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, `{}`)
		if status == http.StatusCreated {
			require.Equal(t, "true", replayed)
			break
		}
		require.Equal(t, http.StatusConflict, status)
		require.True(t, time.Now().Before(deadline), "the held request never ended")
		time.Sleep(5 * time.Millisecond)
	}
	first := srv.Requests()[0]
	require.Equal(t, idemtest.DelayResponse, first.Fault)
	require.Zero(t, first.Status, "nothing reached the client")
	require.Equal(t, 1, srv.Effects("", "k"))
}
