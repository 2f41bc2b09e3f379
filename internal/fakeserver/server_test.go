package fakeserver_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

func TestSubmitFirstRequestExecutes(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	r := h.submit(t, "k1", `{"amount":100}`)
	require.Equal(t, http.StatusCreated, r.status)
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k1"}`, r.body)
	require.Equal(t, 1, h.srv.Effects("", "k1"))

	r = h.submit(t, "k2", `{"amount":100}`)
	require.Equal(t, "ord_000002", r.result(t)["resourceId"])
	require.Equal(t, fakeserver.Stats{Requests: 2, Submits: 2, SideEffects: 2, Keys: 2, MaxEffectsPerKey: 1}, h.srv.Stats())
}

func TestSubmitRepeatReplays(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	first := h.submit(t, "k1", `{"amount":100}`)
	for i := range 3 {
		r := h.submit(t, "k1", `{"amount":100}`)
		require.Equal(t, http.StatusCreated, r.status, "replay %d", i)
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		require.Equal(t, first.body, r.body)
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
	}
	require.Equal(t, 1, h.srv.Effects("", "k1"))
	st := h.srv.Stats()
	require.Equal(t, 1, st.SideEffects)
	require.Equal(t, 3, st.Replays)
	require.Equal(t, 1, st.MaxEffectsPerKey)
}

func TestSubmitKeyReusedWithDifferentRequest(t *testing.T) {
	tests := []struct {
		name string
		c    call
	}{
		{"body", call{body: `{"amount":101}`}},
		{"path", call{path: "/payments", body: `{"amount":100}`}},
		{"query string", call{path: "/orders?x=1", body: `{"amount":100}`}},
		{"method", call{method: http.MethodPut, body: `{"amount":100}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakeserver.Config{})
			require.Equal(t, http.StatusCreated, h.submit(t, "k1", `{"amount":100}`).status)
			tt.c.key = "k1"
			r := h.do(t, tt.c)
			require.Equal(t, http.StatusUnprocessableEntity, r.status)
			require.Equal(t, "idempotency key reused with a different request", r.errorMessage(t))
			require.Equal(t, 1, h.srv.Effects("", "k1"))
			require.Equal(t, 1, h.srv.Stats().Conflicts)
			// The stored result is intact.
			require.Equal(t, "true", h.submit(t, "k1", `{"amount":100}`).header.Get("Idempotent-Replayed"))
		})
	}
}

func TestSubmitMissingKey(t *testing.T) {
	tests := []struct {
		name   string
		cfg    fakeserver.Config
		header http.Header
		want   string
	}{
		{"no header", fakeserver.Config{}, nil, "missing Idempotency-Key header"},
		{"empty header", fakeserver.Config{}, http.Header{"Idempotency-Key": {""}}, "missing Idempotency-Key header"},
		{"custom header", fakeserver.Config{KeyHeader: "PayPal-Request-Id"}, http.Header{"Idempotency-Key": {"k1"}}, "missing PayPal-Request-Id header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.cfg)
			r := h.do(t, call{header: tt.header, body: "{}"})
			require.Equal(t, http.StatusBadRequest, r.status)
			require.Equal(t, tt.want, r.errorMessage(t))
			st := h.srv.Stats()
			require.Equal(t, 0, st.SideEffects)
			require.Equal(t, 1, st.Submits)
			require.Equal(t, http.StatusBadRequest, h.lastRequest(t).Status)
		})
	}
}

func TestSubmitCustomKeyHeader(t *testing.T) {
	h := newHarness(t, fakeserver.Config{KeyHeader: "X-Idempotency-Key"})
	r := h.do(t, call{header: http.Header{"X-Idempotency-Key": {"abc"}}})
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "abc", r.result(t)["key"])
	require.Equal(t, 1, h.srv.Effects("", "abc"))
}

func TestSubmitKeySyntax(t *testing.T) {
	long := strings.Repeat("k", fakeserver.MaxKeyLen)
	tests := []struct {
		raw     string
		wantKey string // "" means 400
	}{
		{"abc", "abc"},
		{`"abc"`, "abc"},
		{`"a\"b\\c"`, `a"b\c`},
		{`"with space"`, "with space"},
		{"550e8400-e29b-41d4-a716-446655440000", "550e8400-e29b-41d4-a716-446655440000"},
		{long, long},
		{long + "k", ""},
		{`""`, ""},
		{`"abc`, ""},
		{`"ab"c"`, ""},
		{`"a\nb"`, ""},
		{`"abc";p=1`, ""},
		{`"tab	in"`, ""},
		{"a b", ""},
		{`a"b`, ""},
		{`a\b`, ""},
		{"caf\u00e9", ""},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			h := newHarness(t, fakeserver.Config{})
			r := h.do(t, call{header: http.Header{"Idempotency-Key": {tt.raw}}})
			if tt.wantKey == "" {
				require.Equal(t, http.StatusBadRequest, r.status)
				require.Contains(t, r.errorMessage(t), "invalid Idempotency-Key header")
				require.Equal(t, "", h.lastRequest(t).Key)
				require.Equal(t, tt.raw, h.lastRequest(t).RawKey)
				return
			}
			require.Equal(t, http.StatusCreated, r.status, r.body)
			require.Equal(t, tt.wantKey, r.result(t)["key"])
			require.Equal(t, 1, h.srv.Effects("", tt.wantKey))
		})
	}
}

func TestSubmitQuotedAndBareKeyAreTheSameKey(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
	r := h.submit(t, `"k1"`, "{}")
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, h.srv.Effects("", "k1"))
}

func TestSubmitTwoKeyHeaders(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	r := h.do(t, call{header: http.Header{"Idempotency-Key": {"a", "b"}}})
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, r.errorMessage(t), "more than one")
}

func TestKeysAreScopedPerCaller(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	a := h.do(t, call{key: "k1", scope: "Bearer alice", body: "{}"})
	b := h.do(t, call{key: "k1", scope: "Bearer bob", body: `{"other":1}`})
	n := h.do(t, call{key: "k1", body: "{}"})
	for _, r := range []reply{a, b, n} {
		require.Equal(t, http.StatusCreated, r.status)
		require.Empty(t, r.header.Get("Idempotent-Replayed"))
	}
	require.Equal(t, 1, h.srv.Effects("Bearer alice", "k1"))
	require.Equal(t, 1, h.srv.Effects("Bearer bob", "k1"))
	require.Equal(t, 1, h.srv.Effects("", "k1"))

	// The result endpoint is scoped the same way.
	q := h.do(t, call{method: http.MethodGet, path: "/operations/k1", scope: "Bearer bob"})
	require.Equal(t, b.body, q.body)
	require.Equal(t, http.StatusNotFound, h.do(t, call{method: http.MethodGet, path: "/operations/k1", scope: "Bearer carol"}).status)
}

func TestCustomScopeHeader(t *testing.T) {
	h := newHarness(t, fakeserver.Config{ScopeHeader: "X-Account"})
	for _, account := range []string{"acct_1", "acct_2"} {
		r := h.do(t, call{key: "k1", header: http.Header{"X-Account": {account}}, scope: "ignored"})
		require.Equal(t, http.StatusCreated, r.status)
		require.Empty(t, r.header.Get("Idempotent-Replayed"))
		require.Equal(t, 1, h.srv.Effects(account, "k1"))
	}
}

func TestQuery(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	r := h.query(t, "k1")
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "not found", r.errorMessage(t))

	h.submit(t, "k1", "{}")
	r = h.query(t, "k1")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_000001","key":"k1"}`, r.body)
	st := h.srv.Stats()
	require.Equal(t, 2, st.Queries)
	require.Equal(t, 1, st.Submits)
	require.Equal(t, 3, st.Requests)
}

func TestQueryKeyIsPathEscaped(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	key := `order/42 "x"`
	r := h.do(t, call{header: http.Header{"Idempotency-Key": {`"order/42 \"x\""`}}})
	require.Equal(t, http.StatusCreated, r.status)
	q := h.do(t, call{method: http.MethodGet, path: "/operations/order%2F42%20%22x%22"})
	require.Equal(t, http.StatusOK, q.status)
	require.Equal(t, key, q.result(t)["key"])
	req := h.lastRequest(t)
	require.Equal(t, key, req.Key)
	require.Equal(t, "order%2F42%20%22x%22", req.RawKey)
}

func TestMethodNotAllowed(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	tests := []struct {
		method, path, allow string
	}{
		{http.MethodGet, "/orders", "POST, PUT, PATCH, DELETE"},
		{http.MethodPost, "/operations/k1", "GET"},
		{http.MethodPost, "/_stats", "GET"},
		{http.MethodGet, "/_reset", "POST"},
		{http.MethodGet, "/_faults", "POST"},
	}
	for _, tt := range tests {
		r := h.do(t, call{method: tt.method, path: tt.path, key: "k1"})
		require.Equal(t, http.StatusMethodNotAllowed, r.status, "%s %s", tt.method, tt.path)
		require.Equal(t, tt.allow, r.header.Get("Allow"))
		r.errorMessage(t)
	}
	r := h.do(t, call{method: http.MethodGet, path: "/_nothing"})
	require.Equal(t, http.StatusNotFound, r.status)
	r.errorMessage(t)
	require.Equal(t, 0, h.srv.Stats().SideEffects)
}

func TestBodyTooLarge(t *testing.T) {
	h := newHarness(t, fakeserver.Config{MaxBody: 10})
	r := h.submit(t, "k1", strings.Repeat("x", 11))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	r.errorMessage(t)
	require.Equal(t, 0, h.srv.Effects("", "k1"))
	require.Equal(t, http.StatusRequestEntityTooLarge, h.lastRequest(t).Status)
	require.Equal(t, http.StatusCreated, h.submit(t, "k1", strings.Repeat("x", 10)).status)
}

func TestMaxKeys(t *testing.T) {
	h := newHarness(t, fakeserver.Config{MaxKeys: 2, Retention: time.Hour})
	h.submit(t, "k1", "{}")
	h.clock.Advance(time.Minute)
	h.submit(t, "k2", "{}")
	r := h.submit(t, "k3", "{}")
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "key store full", r.errorMessage(t))
	require.Equal(t, 0, h.srv.Effects("", "k3"))
	// Stored keys still replay.
	require.Equal(t, "true", h.submit(t, "k1", "{}").header.Get("Idempotent-Replayed"))
	// Once k1 expires there is room again.
	h.clock.Advance(time.Hour - time.Minute)
	require.Equal(t, http.StatusCreated, h.submit(t, "k3", "{}").status)
	require.Equal(t, 2, h.srv.Stats().Keys)
}

func TestExpiry(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Retention: time.Hour})
	first := h.submit(t, "k1", "{}")
	require.Equal(t, "ord_000001", first.result(t)["resourceId"])

	h.clock.Advance(time.Hour - time.Nanosecond)
	r := h.submit(t, "k1", "{}")
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, h.srv.Stats().Keys)

	h.clock.Advance(time.Nanosecond)
	require.Equal(t, 0, h.srv.Stats().Keys)
	require.Equal(t, http.StatusNotFound, h.query(t, "k1").status)
	r = h.submit(t, "k1", `{"different":"body is fine after expiry"}`)
	require.Equal(t, http.StatusCreated, r.status)
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	require.Equal(t, "ord_000002", r.result(t)["resourceId"])

	require.Equal(t, 2, h.srv.Effects("", "k1"), "effects count across expiry")
	st := h.srv.Stats()
	require.Equal(t, 2, st.MaxEffectsPerKey)
	require.Equal(t, 2, st.SideEffects)
	require.Equal(t, 1, st.Keys)
}

func TestConcurrentSameKeyHasOneSideEffect(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	h.client = h.ts.Client() // keep-alive connections: more overlap
	const n = 50
	replies := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := h.request(t.Context(), call{key: "same", body: `{"amount":1}`})
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			errs[i] = err
			replies[i] = reply{status: resp.StatusCode, header: resp.Header, body: string(body)}
		})
	}
	close(start)
	wg.Wait()

	executed := 0
	for i, r := range replies {
		require.NoError(t, errs[i])
		switch {
		case r.status == http.StatusCreated && r.header.Get("Idempotent-Replayed") == "":
			executed++
		case r.status == http.StatusCreated:
		case r.status == http.StatusConflict:
			require.Equal(t, "1", r.header.Get("Retry-After"))
		default:
			t.Errorf("reply %d: status %d, body %s", i, r.status, r.body)
		}
	}
	require.Equal(t, 1, executed)
	require.Equal(t, 1, h.srv.Effects("", "same"))
	require.Equal(t, 1, h.srv.Stats().SideEffects)
	require.Len(t, h.srv.Requests(), n)
}

func TestConcurrentDistinctKeys(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	h.client = h.ts.Client()
	const n = 40
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			resp, err := h.request(t.Context(), call{key: fmt.Sprintf("k%d", i%10), scope: fmt.Sprint(i % 3)})
			if err == nil {
				statuses[i] = resp.StatusCode
				resp.Body.Close()
			}
			_ = h.srv.Stats()
			_ = h.srv.Requests()
		})
	}
	wg.Wait()
	for i, s := range statuses {
		require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, s, "request %d", i)
	}
	st := h.srv.Stats()
	require.Equal(t, 30, st.SideEffects)
	require.Equal(t, 1, st.MaxEffectsPerKey)
	require.Equal(t, 30, st.Keys)
}

func TestRequestsLog(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	at := h.clock.Now()
	h.do(t, call{key: `"k1"`, scope: "Bearer a", body: "hello"})
	h.clock.Advance(time.Second)
	h.do(t, call{method: http.MethodGet, path: "/operations/k1", scope: "Bearer a"})
	h.do(t, call{path: "/_stats", method: http.MethodGet}) // control: not logged

	got := h.srv.Requests()
	require.Equal(t, []fakeserver.Request{
		{Method: "POST", Path: "/orders", Scope: "Bearer a", Key: "k1", RawKey: `"k1"`, BodySHA256: sha256.Sum256([]byte("hello")), Status: 201, At: at},
		{Method: "GET", Path: "/operations/k1", Scope: "Bearer a", Key: "k1", RawKey: "k1", Status: 200, At: at.Add(time.Second)},
	}, got)

	// Requests returns a copy.
	got[0].Status = 999
	require.Equal(t, 201, h.srv.Requests()[0].Status)
}

func TestControlEndpoints(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	h.submit(t, "k1", "{}")
	h.submit(t, "k1", "{}")

	r := h.do(t, call{method: http.MethodGet, path: "/_stats"})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.JSONEq(t, `{"requests":2,"submits":2,"queries":0,"side_effects":1,"keys":1,"max_effects_per_key":1,"replays":1,"conflicts":0,"refusals":0,"foreign_effects":0,"max_submits_after_final":1}`, r.body)

	r = h.do(t, call{path: "/_faults", body: `{"kind":"unavailable","retry_after":"2s"}`})
	require.Equal(t, http.StatusNoContent, r.status)
	r = h.submit(t, "k2", "{}")
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "2", r.header.Get("Retry-After"))

	r = h.do(t, call{path: "/_reset"})
	require.Equal(t, http.StatusNoContent, r.status)
	require.Equal(t, fakeserver.Stats{}, h.srv.Stats())
	require.Empty(t, h.srv.Requests())
	require.Equal(t, 0, h.srv.Effects("", "k1"))
	r = h.submit(t, "k1", "{}")
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	require.Equal(t, "ord_000001", r.result(t)["resourceId"])
}

func TestInjectFaultOverHTTPRejectsBadFaults(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	for _, body := range []string{
		``,
		`not json`,
		`{"kind":"nope"}`,
		`{"kind":"throttle","retryAfter":"1s"}`,
		`{"kind":"delay-response","delay":"soon"}`,
		`{"kind":"delay-response","delay":"-1s"}`,
		`{"kind":"throttle","count":-1}`,
		`{"kind":"decline","query":true}`,
	} {
		r := h.do(t, call{path: "/_faults", body: body})
		require.Equal(t, http.StatusBadRequest, r.status, "body %q", body)
		require.Contains(t, r.errorMessage(t), "invalid fault")
	}
	require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
}

func TestFaultJSONRoundTrip(t *testing.T) {
	f := fakeserver.Fault{Kind: fakeserver.Throttle, Count: 2, Key: "k", Query: true, Delay: 1500 * time.Millisecond, RetryAfter: 3 * time.Second, HTTPDate: true}
	b, err := json.Marshal(f)
	require.NoError(t, err)
	require.JSONEq(t, `{"kind":"throttle","count":2,"key":"k","query":true,"delay":"1.5s","retry_after":"3s","http_date":true}`, string(b))
	var back fakeserver.Fault
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, f, back)
}

// allKinds is the list of kinds that error messages offer.
const allKinds = "drop-after-commit, delay-response, error-after-commit, error-before-commit, throttle, unavailable, query-lag, slow-processing, garbage-body, truncated-body, decline, reject-409, preempt, still-running, lost-answer-lag, still-running-decline, still-running-processing"

func TestInjectInvalidFaultIsAnErrorAndChangesNothing(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	tests := []struct {
		name  string
		fault fakeserver.Fault
		want  string
	}{
		{"unknown kind", fakeserver.Fault{Kind: "boom"}, `fakeserver: Inject: unknown fault kind "boom" (want one of: ` + allKinds + ")"},
		{"no kind", fakeserver.Fault{Count: 3}, `fakeserver: Inject: unknown fault kind "" (want one of: `},
		{"negative count", fakeserver.Fault{Kind: fakeserver.Throttle, Count: -1}, "fakeserver: Inject: fault throttle: count -1 is negative (want 0 for one request, or the number of requests to fault)"},
		{"negative delay", fakeserver.Fault{Kind: fakeserver.DelayResponse, Delay: -time.Second}, "fakeserver: Inject: fault delay-response: delay -1s is negative (want 0 or a positive duration)"},
		{"negative retry-after", fakeserver.Fault{Kind: fakeserver.Unavailable, RetryAfter: -time.Second}, "fakeserver: Inject: fault unavailable: retry-after -1s is negative"},
		{"query fault of a submit-only kind", fakeserver.Fault{Kind: fakeserver.QueryLag, Query: true}, "fakeserver: Inject: fault query-lag does not apply to result queries (want Query false, or a query fault: drop-after-commit, delay-response, error-before-commit, throttle, unavailable, garbage-body, truncated-body)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = h.srv.Inject(tt.fault) })
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
			// The bare cause, without the prefix, is wrapped.
			require.Equal(t, strings.TrimPrefix(err.Error(), "fakeserver: Inject: "), errors.Unwrap(err).Error())
		})
	}

	// Nothing was scripted: the next submit and query get no fault.
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status)
	require.Empty(t, h.lastRequest(t).Fault)
	require.Equal(t, http.StatusOK, h.query(t, "k1").status)
	require.Empty(t, h.lastRequest(t).Fault)
	require.Equal(t, 1, h.srv.Stats().SideEffects)
}

func TestSetProfileInvalidIsAnErrorAndKeepsTheProfile(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.SetProfile(fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.Unavailable: 1}}))
	rates := func(r map[fakeserver.FaultKind]float64) fakeserver.Profile { return fakeserver.Profile{Rates: r} }
	tests := []struct {
		name    string
		profile fakeserver.Profile
		want    string
	}{
		{"rate above 1", rates(map[fakeserver.FaultKind]float64{fakeserver.Throttle: 1.5}), "fakeserver: SetProfile: rate of throttle is 1.5 (want a probability between 0 and 1)"},
		{"negative rate", rates(map[fakeserver.FaultKind]float64{fakeserver.Throttle: -0.1}), "fakeserver: SetProfile: rate of throttle is -0.1 (want a probability between 0 and 1)"},
		{"NaN rate", rates(map[fakeserver.FaultKind]float64{fakeserver.Throttle: math.NaN()}), "rate of throttle is NaN"},
		{"rates above 1 in sum", rates(map[fakeserver.FaultKind]float64{fakeserver.Throttle: 0.6, fakeserver.Unavailable: 0.6}), "fakeserver: SetProfile: rates sum to 1.2 (want at most 1: a request gets at most one fault)"},
		{"unknown kind", rates(map[fakeserver.FaultKind]float64{"x": 0.1}), `fakeserver: SetProfile: unknown fault kind "x" (want one of: ` + allKinds + ")"},
		{"negative delay", fakeserver.Profile{Delay: -time.Second}, "fakeserver: SetProfile: delay -1s is negative (want 0 or a positive duration)"},
		{"negative retry-after", fakeserver.Profile{RetryAfter: -time.Second}, "fakeserver: SetProfile: retry-after -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = h.srv.SetProfile(tt.profile) })
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}

	// The profile set before the refusals still applies.
	require.Equal(t, http.StatusServiceUnavailable, h.submit(t, "k1", "{}").status)
	require.Equal(t, fakeserver.Unavailable, h.lastRequest(t).Fault)
}

func TestNewInvalidConfigIsAnError(t *testing.T) {
	tests := []struct {
		name string
		cfg  fakeserver.Config
		want string
	}{
		{"invalid profile", fakeserver.Config{Profile: fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.Decline: 2}}}, "fakeserver: New: profile: rate of decline is 2 (want a probability between 0 and 1)"},
		{"unknown kind in profile", fakeserver.Config{Profile: fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{"x": 0.1}}}, `fakeserver: New: profile: unknown fault kind "x"`},
		{"key header with a space", fakeserver.Config{KeyHeader: "Idempotency Key"}, `fakeserver: New: key header "Idempotency Key" is not a valid header name (want a token such as Idempotency-Key, with no spaces, colons or other separators)`},
		{"key header with a colon", fakeserver.Config{KeyHeader: "Idem:Key"}, `key header "Idem:Key" is not a valid header name`},
		{"scope header", fakeserver.Config{ScopeHeader: "X-Account\r\n"}, `fakeserver: New: scope header "X-Account\r\n" is not a valid header name`},
		{"negative retention", fakeserver.Config{Retention: -time.Hour}, "fakeserver: New: retention -1h0m0s is negative (want a positive duration, or 0 for the default 24h0m0s)"},
		{"negative max keys", fakeserver.Config{MaxKeys: -1}, "fakeserver: New: max keys -1 is negative (want a positive number, or 0 for the default 100000)"},
		{"negative max body", fakeserver.Config{MaxBody: -1}, "fakeserver: New: max body -1 is negative (want a positive number of bytes, or 0 for the default 1048576)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				srv *fakeserver.Server
				err error
			)
			require.NotPanics(t, func() { srv, err = fakeserver.New(tt.cfg) })
			require.Nil(t, srv)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}

	// Zero fields take their defaults; a token header name is accepted.
	srv, err := fakeserver.New(fakeserver.Config{KeyHeader: "X-Idempotency_Key.v2", ScopeHeader: "x-account"})
	require.NoError(t, err)
	require.NotNil(t, srv)
}

func TestFaultKindsAreDescribed(t *testing.T) {
	kinds := fakeserver.FaultKinds()
	require.Len(t, kinds, 17)
	for _, k := range kinds {
		require.NotEmpty(t, k.Description(), k)
	}
	require.Empty(t, fakeserver.FaultKind("nope").Description())
}
