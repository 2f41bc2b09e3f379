package fakeserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestBehaviorStoredErrors: under stored-errors the handler's 500 and 503
// are the key's answer, replayed with the same status and the replay
// header for the life of the key; under the IETF draft they are not
// stored, and the next request executes. The 429 of a rate limiter is
// never stored.
func TestBehaviorStoredErrors(t *testing.T) {
	tests := []struct {
		kind        fakeserver.FaultKind
		status      int
		effects     int
		queryStatus int // the result endpoint afterwards
	}{
		{fakeserver.ErrorAfterCommit, http.StatusInternalServerError, 1, http.StatusOK},
		{fakeserver.ErrorBeforeCommit, http.StatusInternalServerError, 0, http.StatusNotFound},
		{fakeserver.Unavailable, http.StatusServiceUnavailable, 0, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			h := newHarness(t, fakeserver.Config{Behavior: fakeserver.StoredErrors()})
			require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: tt.kind, RetryAfter: 3 * time.Second}))
			first := h.submit(t, "k1", `{"amount":1}`)
			require.Equal(t, tt.status, first.status, "first answer")
			require.Empty(t, first.header.Get("Idempotent-Replayed"), "the first answer is not a replay")
			for i := range 3 {
				r := h.submit(t, "k1", `{"amount":1}`)
				require.Equalf(t, tt.status, r.status, "replay %d", i+1)
				require.Equalf(t, "true", r.header.Get("Idempotent-Replayed"), "replay %d header", i+1)
				require.Equalf(t, first.body, r.body, "replay %d body", i+1)
				if tt.kind == fakeserver.Unavailable {
					require.Equal(t, "3", r.header.Get("Retry-After"), "the stored Retry-After")
				}
			}
			h.clock.Advance(23 * time.Hour)
			require.Equal(t, tt.status, h.submit(t, "k1", `{"amount":1}`).status, "still stored a day later")
			require.Equal(t, tt.queryStatus, h.query(t, "k1").status, "result endpoint")
			require.Equal(t, fakeserver.KeyStats{Effects: tt.effects, SubmitsAfterFinal: 4}, h.srv.KeyStats("", "k1"))
			st := h.srv.Stats()
			require.Equal(t, 4, st.Replays)
			require.Equal(t, 4, st.MaxSubmitsAfterFinal)

			// Under the IETF draft the same fault is not stored: the next
			// request executes (or replays the committed result).
			h = newHarness(t, fakeserver.Config{})
			require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: tt.kind}))
			require.Equal(t, tt.status, h.submit(t, "k1", `{"amount":1}`).status)
			r := h.submit(t, "k1", `{"amount":1}`)
			require.Equal(t, http.StatusCreated, r.status, "not stored under the IETF draft")
			require.Equal(t, 1, h.srv.Effects("", "k1"))
		})
	}

	t.Run("429 is never stored", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{Behavior: fakeserver.StoredErrors()})
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Throttle}))
		require.Equal(t, http.StatusTooManyRequests, h.submit(t, "k1", "{}").status)
		require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
	})
	t.Run("a fault on a used key finds the stored answer first", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{Behavior: fakeserver.StoredErrors()})
		require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Unavailable}))
		r := h.submit(t, "k1", "{}")
		require.Equal(t, http.StatusCreated, r.status, "the handler is not reached for a used key")
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		// The fault still waits for a submit that executes.
		require.Equal(t, http.StatusServiceUnavailable, h.submit(t, "k2", "{}").status)
	})
}

// TestBehaviorNoBodyCompare: a used key replays its stored answer to a
// different request: silently, as far as the body goes, but marked
// replayed.
func TestBehaviorNoBodyCompare(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Behavior: fakeserver.NoBodyCompare()})
	first := h.submit(t, "k1", `{"amount":1}`)
	require.Equal(t, http.StatusCreated, first.status)
	r := h.submit(t, "k1", `{"amount":999}`)
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.body, r.body, "the first request's answer")
	r = h.do(t, call{method: http.MethodPut, path: "/other", key: "k1", body: "x"})
	require.Equal(t, http.StatusCreated, r.status, "another method and path")
	st := h.srv.Stats()
	require.Zero(t, st.Conflicts)
	require.Equal(t, 2, st.Replays)
	require.Equal(t, 1, h.srv.Effects("", "k1"))
}

// TestBehaviorConflictStatus: the status of a used key with another
// request is configurable; a status that is not a 4xx is refused.
func TestBehaviorConflictStatus(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Behavior: fakeserver.Conflict417()})
	h.submit(t, "k1", `{"amount":1}`)
	r := h.submit(t, "k1", `{"amount":2}`)
	require.Equal(t, http.StatusExpectationFailed, r.status)
	require.Equal(t, "idempotency key reused with a different request", r.errorMessage(t))
	require.Equal(t, 1, h.srv.Stats().Conflicts)

	h = newHarness(t, fakeserver.Config{Behavior: fakeserver.Behavior{ConflictStatus: http.StatusBadRequest}})
	h.submit(t, "k1", `{"amount":1}`)
	require.Equal(t, http.StatusBadRequest, h.submit(t, "k1", `{"amount":2}`).status)

	_, err := fakeserver.New(fakeserver.Config{Behavior: fakeserver.Behavior{ConflictStatus: 200}})
	require.EqualError(t, err, "fakeserver: New: behavior conflict-200: conflict status 200 is not a 4xx (want a client error such as 422, 409 or 417, or 0 for 422)")
}

// TestBehaviorShortWindow: the short-window preset forgets a key after 30
// minutes; a retention set twice, differently, is refused.
func TestBehaviorShortWindow(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ShortWindow()})
	h.submit(t, "k1", "{}")
	h.clock.Advance(29 * time.Minute)
	require.Equal(t, "true", h.submit(t, "k1", "{}").header.Get("Idempotent-Replayed"), "within the window")
	h.clock.Advance(time.Minute)
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusCreated, r.status)
	require.Empty(t, r.header.Get("Idempotent-Replayed"), "executed again after 30 minutes")
	require.Equal(t, fakeserver.KeyStats{Effects: 2, SubmitsAfterFinal: 1}, h.srv.KeyStats("", "k1"))

	_, err := fakeserver.New(fakeserver.Config{Retention: time.Hour, Behavior: fakeserver.ShortWindow()})
	require.EqualError(t, err, "fakeserver: New: retention 1h0m0s and behavior short-window's retention 30m0s differ (set one of them)")
	_, err = fakeserver.New(fakeserver.Config{Retention: 30 * time.Minute, Behavior: fakeserver.ShortWindow()})
	require.NoError(t, err, "the same window twice")
}

// TestPreempt: someone else's request with the key arrives first. While it
// processes, ours gets 409; then the answer to a used key with another
// request, which depends on the behaviour. Its side effect is not ours.
func TestPreempt(t *testing.T) {
	tests := []struct {
		behavior fakeserver.Behavior
		status   int
		replayed bool
	}{
		{fakeserver.IETFDraft(), http.StatusUnprocessableEntity, false},
		{fakeserver.StoredErrors(), http.StatusUnprocessableEntity, false},
		{fakeserver.Conflict417(), http.StatusExpectationFailed, false},
		{fakeserver.NoBodyCompare(), http.StatusCreated, true},
	}
	for _, tt := range tests {
		for _, how := range []string{"method", "fault"} {
			t.Run(tt.behavior.Name+"/"+how, func(t *testing.T) {
				h := newHarness(t, fakeserver.Config{Behavior: tt.behavior})
				if how == "method" {
					require.NoError(t, h.srv.Preempt("", "k1", 10*time.Second))
				} else {
					require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Preempt, Key: "k1", Delay: 10 * time.Second}))
				}
				for range 2 {
					r := h.submit(t, "k1", `{"amount":1}`)
					require.Equal(t, http.StatusConflict, r.status, "while the other request processes")
					require.Equal(t, "1", r.header.Get("Retry-After"))
				}
				q := h.query(t, "k1")
				require.Equal(t, "processing", q.result(t)["state"], "the result endpoint shows the other request")

				h.clock.Advance(10 * time.Second)
				for range 3 {
					r := h.submit(t, "k1", `{"amount":1}`)
					require.Equal(t, tt.status, r.status)
					require.Equal(t, tt.replayed, r.header.Get("Idempotent-Replayed") == "true", "replay header")
					if tt.replayed {
						require.Equal(t, "ord_000001", r.result(t)["resourceId"], "the other request's order")
					}
				}
				want := fakeserver.KeyStats{ForeignEffects: 1, SubmitsAfterFinal: 3, Conflicts: 3}
				if tt.replayed {
					want.Conflicts = 0
				}
				require.Equal(t, want, h.srv.KeyStats("", "k1"))
				st := h.srv.Stats()
				require.Zero(t, st.SideEffects, "side effects of requests received")
				require.Zero(t, st.MaxEffectsPerKey)
				require.Equal(t, 1, st.ForeignEffects)
			})
		}
	}

	t.Run("without a hold the conflict comes at once", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{})
		require.NoError(t, h.srv.Preempt("Bearer a", "k1", 0))
		require.Equal(t, http.StatusUnprocessableEntity, h.do(t, call{key: "k1", scope: "Bearer a", body: "{}"}).status)
		require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status, "another scope's key is free")
	})
	t.Run("invalid", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{})
		h.submit(t, "k1", "{}")
		require.EqualError(t, h.srv.Preempt("", "k1", 0), `fakeserver: Preempt: key "k1" of scope "" is in use (preempt a key before its first request)`)
		require.EqualError(t, h.srv.Preempt("", "k2", -time.Second), "fakeserver: Preempt: hold -1s is negative (want 0 or a positive duration)")
		require.EqualError(t, h.srv.Preempt("", "", 0), `fakeserver: Preempt: key "": want 1 to 255 bytes`)
		require.Zero(t, h.srv.Stats().ForeignEffects, "nothing preempted")
	})
}

// TestReject409IsTheKeysFinalAnswer: the handler's own 409 is stored as a
// failed result, unlike the 409 of a request in flight.
func TestReject409IsTheKeysFinalAnswer(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Reject409}))
	r := h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusConflict, r.status)
	require.Empty(t, r.header.Get("Retry-After"), "not a request in flight")
	require.Equal(t, "failed", r.result(t)["state"])
	r = h.submit(t, "k1", "{}")
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	q := h.query(t, "k1").result(t)
	require.Equal(t, "failed", q["state"])
	require.Equal(t, "order conflicts with the current state of the resource", q["reason"])
	require.Equal(t, fakeserver.KeyStats{SubmitsAfterFinal: 1}, h.srv.KeyStats("", "k1"))
}

// TestSubmitsAfterFinal counts only the submits that arrive once the
// answer can no longer change: not those during slow processing or while
// the first request is in flight.
func TestSubmitsAfterFinal(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.SlowProcessing, Delay: 5 * time.Second}))
	require.Equal(t, http.StatusAccepted, h.submit(t, "k1", "{}").status)
	require.Equal(t, http.StatusConflict, h.submit(t, "k1", "{}").status)
	require.Zero(t, h.srv.KeyStats("", "k1").SubmitsAfterFinal, "processing")
	h.clock.Advance(5 * time.Second)
	h.submit(t, "k1", "{}")
	h.submit(t, "k1", `{"other":1}`) // 422, after the answer was final
	h.query(t, "k1")
	require.Equal(t, fakeserver.KeyStats{Effects: 1, SubmitsAfterFinal: 2, Conflicts: 1}, h.srv.KeyStats("", "k1"))
	require.Equal(t, 2, h.srv.Stats().MaxSubmitsAfterFinal)
	h.srv.Reset()
	require.Zero(t, h.srv.KeyStats("", "k1"), "Reset forgets")
}

// TestBehaviorOverHTTP: GET /_behavior shows the behaviour with its
// defaults filled in, under the names of the command's flags; GET /_key
// the counters of one key.
func TestBehaviorOverHTTP(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ShortWindow()})
	r := h.do(t, call{method: http.MethodGet, path: "/_behavior"})
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"name":"short-window","store_errors":false,"no_body_compare":false,"conflict_status":422,"retention":"30m0s"}`, r.body)

	h = newHarness(t, fakeserver.Config{Behavior: fakeserver.Behavior{StoreErrors: true, ConflictStatus: 409}})
	r = h.do(t, call{method: http.MethodGet, path: "/_behavior"})
	require.JSONEq(t, `{"name":"store-errors+conflict-409","store_errors":true,"no_body_compare":false,"conflict_status":409,"retention":"24h0m0s"}`, r.body)

	h.do(t, call{key: "k/1", scope: "Bearer a", body: "{}"})
	h.do(t, call{key: "k/1", scope: "Bearer a", body: "{}"})
	r = h.do(t, call{method: http.MethodGet, path: "/_key?key=k%2F1&scope=Bearer+a"})
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"effects":1,"foreign_effects":0,"submits_after_final":1,"conflicts":0,"refusals":0}`, r.body)
	r = h.do(t, call{method: http.MethodGet, path: "/_key?scope=x"})
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "missing key parameter (GET /_key?key=K&scope=S)", r.errorMessage(t))
	require.Equal(t, 2, h.srv.Stats().Requests, "control requests are not counted")
}

func TestBehaviorPresets(t *testing.T) {
	var names []string
	for _, b := range fakeserver.Behaviors() {
		names = append(names, b.String())
		got, err := fakeserver.BehaviorNamed(b.Name)
		require.NoError(t, err)
		require.Equal(t, b, got)
	}
	require.Equal(t, []string{"ietf-draft", "stored-errors", "no-body-compare", "conflict-417", "short-window", "client-order-id"}, names)
	require.Equal(t, "ietf-draft", fakeserver.Behavior{}.String(), "the zero value")
	_, err := fakeserver.BehaviorNamed("stripe")
	require.EqualError(t, err, `unknown behavior "stripe" (want one of: ietf-draft, stored-errors, no-body-compare, conflict-417, short-window, client-order-id)`)
	_, err = fakeserver.New(fakeserver.Config{Behavior: fakeserver.Behavior{Retention: -time.Second}})
	require.ErrorContains(t, err, "retention -1s is negative")
}
