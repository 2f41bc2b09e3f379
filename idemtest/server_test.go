package idemtest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// send posts body with the given headers and returns the status, the
// replay header and the body.
func send(t *testing.T, c *http.Client, url string, header http.Header, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b)
}

func TestNewServerListensOnLoopback(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), srv.URL)
	require.Equal(t, srv.URL+"/operations/a%2Fb%20c", srv.ResultURL("a/b c"))
}

func TestOptions(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var calls atomic.Int64
	srv, err := idemtest.NewServer(
		idemtest.WithKeyHeader("PayPal-Request-Id"),
		idemtest.WithScopeHeader("X-Account"),
		idemtest.WithRetention(time.Minute),
		idemtest.WithClock(func() time.Time { calls.Add(1); return now }),
		idemtest.WithMaxKeys(1),
	)
	require.NoError(t, err)
	defer srv.Close()
	c := srv.Client()

	status, _, body := send(t, c, srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, "{}")
	require.Equal(t, http.StatusBadRequest, status)
	require.JSONEq(t, `{"error":"missing PayPal-Request-Id header"}`, body)

	status, _, _ = send(t, c, srv.URL+"/orders", http.Header{"Paypal-Request-Id": {"k"}, "X-Account": {"acct_1"}}, "{}")
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, 1, srv.Effects("acct_1", "k"))
	require.Positive(t, calls.Load(), "the clock is used")

	status, _, body = send(t, c, srv.URL+"/orders", http.Header{"Paypal-Request-Id": {"k"}, "X-Account": {"acct_2"}}, "{}")
	require.Equal(t, http.StatusServiceUnavailable, status, "max keys")
	require.JSONEq(t, `{"error":"key store full"}`, body)
}

func TestSeedAndProfile(t *testing.T) {
	run := func() []idemtest.FaultKind {
		srv, err := idemtest.NewServer(idemtest.WithSeed(99), idemtest.WithProfile(idemtest.Profile{
			Rates: map[idemtest.FaultKind]float64{idemtest.Throttle: 0.3, idemtest.ErrorBeforeCommit: 0.3},
		}))
		require.NoError(t, err)
		defer srv.Close()
		for range 30 {
			send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, "{}")
		}
		var kinds []idemtest.FaultKind
		for _, r := range srv.Requests() {
			kinds = append(kinds, r.Fault)
		}
		require.Equal(t, 1, srv.Effects("", "k"))
		return kinds
	}
	first := run()
	require.Contains(t, first, idemtest.Throttle)
	require.Equal(t, first, run())
}

func TestSetProfileAndReset(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	require.NoError(t, srv.SetProfile(idemtest.Profile{Rates: map[idemtest.FaultKind]float64{idemtest.Decline: 1}}))
	status, _, body := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, "{}")
	require.Equal(t, http.StatusPaymentRequired, status)
	require.JSONEq(t, `{"state":"failed","reason":"card declined","key":"k"}`, body)

	srv.Reset() // back to the options of NewServer: no profile
	require.Equal(t, idemtest.Stats{}, srv.Stats())
	status, replayed, _ := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, "{}")
	require.Equal(t, http.StatusCreated, status)
	require.Empty(t, replayed)
}

func TestFaultKindsReexported(t *testing.T) {
	kinds := []idemtest.FaultKind{
		idemtest.DropAfterCommit, idemtest.DelayResponse, idemtest.ErrorAfterCommit,
		idemtest.ErrorBeforeCommit, idemtest.Throttle, idemtest.Unavailable, idemtest.QueryLag,
		idemtest.SlowProcessing, idemtest.GarbageBody, idemtest.TruncatedBody, idemtest.Decline,
		idemtest.Reject409, idemtest.Preempt, idemtest.StillRunning, idemtest.LostAnswerLag,
		idemtest.StillRunningDecline, idemtest.StillRunningProcessing,
	}
	require.ElementsMatch(t, kinds, idemtest.FaultKinds())
}

// net/http's Transport resends, by itself, a request carrying an
// Idempotency-Key header when a reused connection dies before any answer:
// the server sees two requests where the caller made one call.
func TestTransportSilentlyResendsOnReusedConnection(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	c := srv.Client()

	send(t, c, srv.URL+"/orders", http.Header{"Idempotency-Key": {"warm-up"}}, "{}")
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))

	var conns atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns.Add(1) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
		http.MethodPost, srv.URL+"/orders", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k")
	resp, err := c.Do(req)
	require.NoError(t, err, "the caller never sees the drop")
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, int64(2), conns.Load())

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	require.Equal(t, idemtest.DropAfterCommit, reqs[1].Fault)
	require.Equal(t, 1, srv.Effects("", "k"))
}

func TestDelayEndsWhenClientGivesUp(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Delay: time.Hour}))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k")
	_, err = srv.Client().Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	srv.Close() // returns: the delayed handler ended with its request
	require.Equal(t, 1, srv.Effects("", "k"))
}

func TestCloseSendsDelayedResponses(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Delay: time.Hour}))
	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "k")
		resp, err := srv.Client().Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return srv.Effects("", "k") == 1 }, 5*time.Second, time.Millisecond)
	srv.Close()
	require.Equal(t, http.StatusCreated, <-status)
}

func TestNewServerInvalidOptionIsAnError(t *testing.T) {
	tests := []struct {
		name string
		opts []idemtest.Option
		want string
	}{
		{"rate above 1", []idemtest.Option{idemtest.WithProfile(idemtest.Profile{Rates: map[idemtest.FaultKind]float64{idemtest.Throttle: 1.5}})},
			"idemtest: NewServer: profile: rate of throttle is 1.5 (want a probability between 0 and 1)"},
		{"negative rate", []idemtest.Option{idemtest.WithProfile(idemtest.Profile{Rates: map[idemtest.FaultKind]float64{idemtest.Throttle: -0.5}})},
			"idemtest: NewServer: profile: rate of throttle is -0.5 (want a probability between 0 and 1)"},
		{"unknown kind", []idemtest.Option{idemtest.WithProfile(idemtest.Profile{Rates: map[idemtest.FaultKind]float64{"drop": 0.1}})},
			`idemtest: NewServer: profile: unknown fault kind "drop" (want one of: drop-after-commit, delay-response,`},
		{"key header", []idemtest.Option{idemtest.WithKeyHeader("Idempotency Key")},
			`idemtest: NewServer: key header "Idempotency Key" is not a valid header name (want a token such as Idempotency-Key`},
		{"scope header", []idemtest.Option{idemtest.WithScopeHeader("X:Account")},
			`idemtest: NewServer: scope header "X:Account" is not a valid header name`},
		{"negative retention", []idemtest.Option{idemtest.WithRetention(-time.Minute)},
			"idemtest: NewServer: retention -1m0s is negative (want a positive duration, or 0 for the default 24h0m0s)"},
		{"negative max keys", []idemtest.Option{idemtest.WithMaxKeys(-1)},
			"idemtest: NewServer: max keys -1 is negative (want a positive number, or 0 for the default 100000)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				srv *idemtest.Server
				err error
			)
			require.NotPanics(t, func() { srv, err = idemtest.NewServer(tt.opts...) })
			require.Nil(t, srv)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestInjectInvalidFaultIsAnErrorAndScriptsNothing(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	tests := []struct {
		name  string
		fault idemtest.Fault
		want  string
	}{
		{"unknown kind", idemtest.Fault{Kind: "x"}, `idemtest: Inject: unknown fault kind "x" (want one of: drop-after-commit, delay-response, error-after-commit, error-before-commit, throttle, unavailable, query-lag, slow-processing, garbage-body, truncated-body, decline, reject-409, preempt, still-running, lost-answer-lag, still-running-decline, still-running-processing)`},
		{"negative count", idemtest.Fault{Kind: idemtest.Unavailable, Count: -2}, "idemtest: Inject: fault unavailable: count -2 is negative (want 0 for one request, or the number of requests to fault)"},
		{"negative delay", idemtest.Fault{Kind: idemtest.DelayResponse, Delay: -time.Millisecond}, "idemtest: Inject: fault delay-response: delay -1ms is negative (want 0 or a positive duration)"},
		{"negative retry-after", idemtest.Fault{Kind: idemtest.Throttle, RetryAfter: -time.Second}, "idemtest: Inject: fault throttle: retry-after -1s is negative (want 0 or a positive duration)"},
		{"query fault of a submit-only kind", idemtest.Fault{Kind: idemtest.Decline, Query: true}, "idemtest: Inject: fault decline does not apply to result queries (want Query false, or a query fault:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = srv.Inject(tt.fault) })
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}

	// The refused faults left the server as it was: no fault applies.
	status, replayed, body := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, "{}")
	require.Equal(t, http.StatusCreated, status, body)
	require.Empty(t, replayed)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Empty(t, reqs[0].Fault)
	require.Equal(t, idemtest.Stats{Requests: 1, Submits: 1, SideEffects: 1, Keys: 1, MaxEffectsPerKey: 1}, srv.Stats())
}

func TestSetProfileInvalidIsAnErrorAndKeepsTheProfile(t *testing.T) {
	srv, err := idemtest.NewServer(idemtest.WithProfile(idemtest.Profile{
		Rates: map[idemtest.FaultKind]float64{idemtest.Decline: 1},
	}))
	require.NoError(t, err)
	defer srv.Close()
	for _, tt := range []struct {
		profile idemtest.Profile
		want    string
	}{
		{idemtest.Profile{Rates: map[idemtest.FaultKind]float64{idemtest.Throttle: 2}}, "idemtest: SetProfile: rate of throttle is 2 (want a probability between 0 and 1)"},
		{idemtest.Profile{Rates: map[idemtest.FaultKind]float64{idemtest.Throttle: 0.7, idemtest.Decline: 0.7}}, "idemtest: SetProfile: rates sum to 1.4 (want at most 1: a request gets at most one fault)"},
		{idemtest.Profile{Delay: -time.Second}, "idemtest: SetProfile: delay -1s is negative (want 0 or a positive duration)"},
	} {
		var err error
		require.NotPanics(t, func() { err = srv.SetProfile(tt.profile) })
		require.Error(t, err)
		require.Contains(t, err.Error(), tt.want)
	}

	// The profile of NewServer still applies.
	status, _, _ := send(t, srv.Client(), srv.URL+"/orders", http.Header{"Idempotency-Key": {"k"}}, "{}")
	require.Equal(t, http.StatusPaymentRequired, status)
}

// TestBehaviorPresetsReexported: every preset of the server is reachable
// by name and by its function, and an invalid behaviour is refused with
// the package's prefix.
func TestBehaviorPresetsReexported(t *testing.T) {
	funcs := []func() idemtest.Behavior{
		idemtest.IETFDraft, idemtest.StoredErrors, idemtest.NoBodyCompare, idemtest.Conflict417, idemtest.ShortWindow,
		idemtest.ClientOrderID,
	}
	presets := idemtest.Behaviors()
	require.Len(t, presets, len(funcs))
	for i, b := range presets {
		require.Equal(t, funcs[i](), b)
		got, err := idemtest.BehaviorNamed(b.Name)
		require.NoError(t, err)
		require.Equal(t, b, got)
	}
	_, err := idemtest.BehaviorNamed("nope")
	require.ErrorContains(t, err, `idemtest: unknown behavior "nope" (want one of: ietf-draft,`)
	_, err = idemtest.NewServer(idemtest.WithBehavior(idemtest.ShortWindow()), idemtest.WithRetention(time.Hour))
	require.EqualError(t, err, "idemtest: NewServer: retention 1h0m0s and behavior short-window's retention 30m0s differ (set one of them)")
	srv, err := idemtest.NewServer(idemtest.WithBehavior(idemtest.Conflict417()))
	require.NoError(t, err)
	defer srv.Close()
	require.Equal(t, "conflict-417", srv.Behavior().Name)
	require.EqualError(t, srv.Preempt("", "k", -time.Second), "idemtest: Preempt: hold -1s is negative (want 0 or a positive duration)")
}
