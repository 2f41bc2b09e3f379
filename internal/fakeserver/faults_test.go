package fakeserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

func TestFaultDropAfterCommit(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.DropAfterCommit}))

	_, err := h.request(t.Context(), call{key: "k1", body: "{}"})
	require.Error(t, err)
	require.Equal(t, 1, h.srv.Effects("", "k1"), "committed before the drop")
	req := h.lastRequest(t)
	require.Equal(t, 0, req.Status)
	require.Equal(t, fakeserver.DropAfterCommit, req.Fault)

	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, "ord_000001", r.result(t)["resourceId"])
	require.Equal(t, 1, h.srv.Effects("", "k1"))
}

func TestFaultDropAfterCommitAppliesToReplays(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	h.submit(t, "k1", "{}")
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.DropAfterCommit}))
	_, err := h.request(t.Context(), call{key: "k1", body: "{}"})
	require.Error(t, err)
	require.Equal(t, 1, h.srv.Stats().Replays)
	require.Equal(t, 1, h.srv.Effects("", "k1"))
}

func TestFaultDelayPastClientTimeout(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.DelayResponse, Delay: time.Hour}))

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := h.request(ctx, call{key: "k1", body: "{}"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, h.srv.Effects("", "k1"), "committed before the delay")

	// The handler stops waiting once the client is gone; then the key
	// replays, and the request is logged unanswered: nothing reached its
	// client.
	var r reply
	require.Eventually(t, func() bool { r = h.submit(t, "k1", "{}"); return r.status == http.StatusCreated },
		5*time.Second, 5*time.Millisecond)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	first := h.srv.Requests()[0]
	require.Equal(t, fakeserver.DelayResponse, first.Fault)
	require.Zero(t, first.Status, "the client gave up before the answer")
}

func TestFaultDelayRepeatWhileInFlightGets409(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.DelayResponse, Delay: time.Hour}))

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		resp, err := h.request(ctx, call{key: "k1", body: "{}"})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return h.srv.Effects("", "k1") == 1 }, 5*time.Second, time.Millisecond)

	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Equal(t, "request with this key is in progress", r.errorMessage(t))
	// A different request with the key is also told to wait.
	require.Equal(t, http.StatusConflict, h.submit(t, "k1", `{"other":1}`).status)
	// The result endpoint already knows the commit.
	require.Equal(t, "succeeded", h.query(t, "k1").result(t)["state"])

	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Eventually(t, func() bool { return h.submit(t, "k1", "{}").header.Get("Idempotent-Replayed") == "true" },
		5*time.Second, time.Millisecond)
	require.Equal(t, 1, h.srv.Effects("", "k1"))
}

func TestFaultDelayShort(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.DelayResponse, Delay: time.Millisecond}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, fakeserver.DelayResponse, h.lastRequest(t).Fault)
}

func TestFaultErrorAfterCommit(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.ErrorAfterCommit}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusInternalServerError, r.status)
	r.errorMessage(t)
	require.Equal(t, 1, h.srv.Effects("", "k1"))

	r = h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status, "the 500 is not stored")
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k1"}`, r.body)
}

func TestFaultErrorBeforeCommit(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.ErrorBeforeCommit}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusInternalServerError, r.status)
	r.errorMessage(t)
	require.Equal(t, 0, h.srv.Effects("", "k1"))
	require.Equal(t, 0, h.srv.Stats().Keys)
	require.Equal(t, http.StatusNotFound, h.query(t, "k1").status)

	r = h.submit(t, "k1", `{"a different body is fine: nothing was recorded":1}`)
	require.Equal(t, http.StatusCreated, r.status)
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
}

func TestFaultThrottleAndUnavailable(t *testing.T) {
	tests := []struct {
		kind       fakeserver.FaultKind
		status     int
		retryAfter time.Duration
		want       string
	}{
		{fakeserver.Throttle, http.StatusTooManyRequests, 0, "1"},
		{fakeserver.Throttle, http.StatusTooManyRequests, 2500 * time.Millisecond, "3"},
		{fakeserver.Unavailable, http.StatusServiceUnavailable, 30 * time.Second, "30"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind)+"/"+tt.want, func(t *testing.T) {
			h := newHarness(t, fakeserver.Config{})
			require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: tt.kind, RetryAfter: tt.retryAfter}))
			r := h.submit(t, "k1", "{}")
			require.Equal(t, tt.status, r.status)
			require.Equal(t, tt.want, r.header.Get("Retry-After"))
			r.errorMessage(t)
			require.Equal(t, 0, h.srv.Effects("", "k1"))
			require.Equal(t, 0, h.srv.Stats().Keys)
			require.Equal(t, tt.kind, h.lastRequest(t).Fault)
			require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
		})
	}
}

func TestFaultRetryAfterHTTPDate(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	// The clock is at 15:09:26.5; now + 2s rounds up to 15:09:29.
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Unavailable, RetryAfter: 2 * time.Second, HTTPDate: true}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "Fri, 14 Mar 2025 15:09:29 GMT", r.header.Get("Retry-After"))
	_, err := http.ParseTime(r.header.Get("Retry-After"))
	require.NoError(t, err)
	// A client judges the date against the answer's Date: both must come
	// from the server's clock, not Date from the wall clock's.
	require.Equal(t, "Fri, 14 Mar 2025 15:09:26 GMT", r.header.Get("Date"))
}

func TestFaultQueryLag(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.QueryLag, Delay: 10 * time.Second}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, 1, h.srv.Effects("", "k1"))

	require.Equal(t, http.StatusNotFound, h.query(t, "k1").status)
	h.clock.Advance(10*time.Second - time.Nanosecond)
	require.Equal(t, http.StatusNotFound, h.query(t, "k1").status)
	h.clock.Advance(time.Nanosecond)
	q := h.query(t, "k1")
	require.Equal(t, http.StatusOK, q.status)
	require.Equal(t, r.body, q.body)
	// Submits replay throughout: only the result endpoint lags.
	require.Equal(t, "true", h.submit(t, "k1", "{}").header.Get("Idempotent-Replayed"))
}

func TestFaultSlowProcessing(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.SlowProcessing, Delay: time.Minute, RetryAfter: 5 * time.Second}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusAccepted, r.status)
	require.JSONEq(t, `{"state":"processing","resourceId":"ord_000001","key":"k1"}`, r.body)
	require.Equal(t, 1, h.srv.Effects("", "k1"))

	again := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusConflict, again.status)
	require.Equal(t, "5", again.header.Get("Retry-After"))
	again.errorMessage(t)
	require.Equal(t, "processing", h.query(t, "k1").result(t)["state"])

	h.clock.Advance(time.Minute)
	q := h.query(t, "k1")
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k1"}`, q.body)
	done := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, done.status)
	require.Equal(t, "true", done.header.Get("Idempotent-Replayed"))
	require.Equal(t, q.body, done.body)
	require.Equal(t, 1, h.srv.Effects("", "k1"))
}

func TestFaultGarbageBody(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.GarbageBody}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status)
	require.False(t, json.Valid([]byte(r.body)), "body %q", r.body)
	require.Equal(t, 1, h.srv.Effects("", "k1"))
	r = h.submit(t, "k1", "{}")
	require.True(t, json.Valid([]byte(r.body)))
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
}

func TestFaultTruncatedBody(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.TruncatedBody}))
	resp, err := h.request(t.Context(), call{key: "k1", body: "{}"})
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	full := `{"state":"succeeded","resourceId":"ord_000001","key":"k1"}`
	require.Equal(t, strconv.Itoa(len(full)), resp.Header.Get("Content-Length"))
	body, err := io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, full[:len(full)/2], string(body))
	require.Equal(t, 1, h.srv.Effects("", "k1"))
	require.Equal(t, full, h.submit(t, "k1", "{}").body)
}

func TestFaultDecline(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Decline}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusPaymentRequired, r.status)
	require.JSONEq(t, `{"state":"failed","reason":"card declined","key":"k1"}`, r.body)
	require.Equal(t, 0, h.srv.Effects("", "k1"))
	require.Equal(t, 0, h.srv.Stats().SideEffects)

	again := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusPaymentRequired, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, r.body, again.body)
	q := h.query(t, "k1")
	require.Equal(t, http.StatusOK, q.status)
	require.Equal(t, r.body, q.body)
}

func TestQueryFaults(t *testing.T) {
	tests := []struct {
		kind   fakeserver.FaultKind
		status int // 0: no answer
	}{
		{fakeserver.ErrorBeforeCommit, http.StatusInternalServerError},
		{fakeserver.Throttle, http.StatusTooManyRequests},
		{fakeserver.Unavailable, http.StatusServiceUnavailable},
		{fakeserver.GarbageBody, http.StatusOK},
		{fakeserver.DelayResponse, http.StatusOK},
		{fakeserver.DropAfterCommit, 0},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			h := newHarness(t, fakeserver.Config{})
			h.submit(t, "k1", "{}")
			require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: tt.kind, Query: true, Delay: time.Millisecond}))
			// A query fault leaves submits alone.
			require.Equal(t, "true", h.submit(t, "k1", "{}").header.Get("Idempotent-Replayed"))

			resp, err := h.request(t.Context(), call{method: http.MethodGet, path: "/operations/k1"})
			if tt.status == 0 {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, tt.status, resp.StatusCode)
				require.Equal(t, tt.kind != fakeserver.GarbageBody, json.Valid(body), "body %q", body)
			}
			req := h.lastRequest(t)
			require.Equal(t, tt.kind, req.Fault)
			require.Equal(t, tt.status, req.Status)
			require.Equal(t, http.StatusOK, h.query(t, "k1").status, "one query only")
		})
	}
}

func TestQueryFaultTruncatedBody(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	h.submit(t, "k1", "{}")
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.TruncatedBody, Query: true}))
	resp, err := h.request(t.Context(), call{method: http.MethodGet, path: "/operations/k1"})
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestFaultCountAndKey(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Throttle, Count: 2, Key: "b"}))
	require.Equal(t, http.StatusCreated, h.submit(t, "a", "{}").status)
	require.Equal(t, http.StatusTooManyRequests, h.submit(t, "b", "{}").status)
	require.Equal(t, http.StatusTooManyRequests, h.submit(t, "b", "{}").status)
	require.Equal(t, http.StatusCreated, h.submit(t, "b", "{}").status)
}

func TestFaultsApplyInInjectionOrder(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Throttle}))
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Unavailable}))
	require.Equal(t, http.StatusTooManyRequests, h.submit(t, "k1", "{}").status)
	require.Equal(t, http.StatusServiceUnavailable, h.submit(t, "k1", "{}").status)
	require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
}

func TestCommitFaultWaitsForANewKey(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	h.submit(t, "k1", "{}")
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Decline}))
	// A replay cannot be declined: the fault stays pending.
	require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
	require.Equal(t, http.StatusPaymentRequired, h.submit(t, "k2", "{}").status)
}

func TestResponseFaultSkipsConflicts(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	h.submit(t, "k1", "{}")
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.ErrorAfterCommit}))
	require.Equal(t, http.StatusUnprocessableEntity, h.submit(t, "k1", `{"x":1}`).status)
	require.Equal(t, http.StatusInternalServerError, h.submit(t, "k1", "{}").status)
}

// faultSequence sends n submits with distinct keys and returns the fault
// each one got.
func faultSequence(t *testing.T, seed int64, n int) []fakeserver.FaultKind {
	t.Helper()
	h := newHarness(t, fakeserver.Config{Seed: seed, Profile: fakeserver.Profile{
		Rates: map[fakeserver.FaultKind]float64{
			fakeserver.ErrorBeforeCommit: 0.1,
			fakeserver.ErrorAfterCommit:  0.1,
			fakeserver.Throttle:          0.1,
			fakeserver.Unavailable:       0.1,
			fakeserver.GarbageBody:       0.1,
			fakeserver.Decline:           0.1,
			fakeserver.QueryLag:          0.1,
		},
		Delay: time.Second,
	}})
	for i := range n {
		h.submit(t, "k"+strconv.Itoa(i), "{}")
	}
	var kinds []fakeserver.FaultKind
	for _, req := range h.srv.Requests() {
		kinds = append(kinds, req.Fault)
	}
	return kinds
}

func TestProfileIsReproducibleFromSeed(t *testing.T) {
	a := faultSequence(t, 42, 200)
	require.Equal(t, a, faultSequence(t, 42, 200))
	require.NotEqual(t, a, faultSequence(t, 43, 200))

	counts := map[fakeserver.FaultKind]int{}
	for _, k := range a {
		counts[k]++
	}
	require.Len(t, counts, 8, "every fault and none occur: %v", counts)
	require.Greater(t, counts[""], 30)
}

func TestProfileEffects(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Seed: 7})
	require.NoError(t, h.srv.SetProfile(fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.Unavailable: 1}, RetryAfter: 4 * time.Second}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "4", r.header.Get("Retry-After"))

	require.NoError(t, h.srv.SetProfile(fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.SlowProcessing: 1}, Delay: time.Second}))
	require.Equal(t, http.StatusAccepted, h.submit(t, "k1", "{}").status)
	// A 409 while processing is not a new execution: no fault applies.
	require.Equal(t, http.StatusConflict, h.submit(t, "k1", "{}").status)

	require.NoError(t, h.srv.SetProfile(fakeserver.Profile{}))
	require.Equal(t, http.StatusCreated, h.submit(t, "k2", "{}").status)

	// Scripted faults win over the profile.
	require.NoError(t, h.srv.SetProfile(fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.Unavailable: 1}}))
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Throttle}))
	require.Equal(t, http.StatusTooManyRequests, h.submit(t, "k3", "{}").status)
	require.Equal(t, http.StatusServiceUnavailable, h.submit(t, "k3", "{}").status)
}

func TestProfileSoakGivesOneSideEffectPerIntent(t *testing.T) {
	// A soak-style run: every intent is retried until it settles, and
	// still gets exactly one side effect.
	h := newHarness(t, fakeserver.Config{Seed: 1, Profile: fakeserver.Profile{
		Rates: map[fakeserver.FaultKind]float64{
			fakeserver.DropAfterCommit:   0.2,
			fakeserver.ErrorAfterCommit:  0.2,
			fakeserver.ErrorBeforeCommit: 0.1,
			fakeserver.TruncatedBody:     0.1,
		},
	}})
	for i := range 50 {
		key := "intent-" + strconv.Itoa(i)
		for attempt := 0; ; attempt++ {
			require.Less(t, attempt, 100)
			resp, err := h.request(t.Context(), call{key: key, body: `{"n":1}`})
			if err != nil {
				continue
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusCreated && json.Valid(body) {
				break
			}
		}
	}
	st := h.srv.Stats()
	require.Equal(t, 50, st.SideEffects)
	require.Equal(t, 1, st.MaxEffectsPerKey)
	require.Greater(t, st.Requests, 50)
}
