package fakeserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestKeyIgnoredExecutesEverySubmit: under key-ignored, Solidgate's
// endpoint without idempotency support ("A value of ignored means the
// endpoint does not", https://api-docs.solidgate.com/api/v2/idempotent-requests),
// every submit with the key places a new order, whatever its body, and
// says so with Idempotency-Status: ignored; nothing is replayed or
// refused. The result endpoint answers the key's last order, as
// Solidgate's order status tells of the order's last payment (modelled).
func TestKeyIgnoredExecutesEverySubmit(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Behavior: fakeserver.KeyIgnored()})
	require.Equal(t, http.StatusNotFound, h.query(t, "k1").status, "no order yet")

	for i, body := range []string{`{"amount":100}`, `{"amount":100}`, `{"amount":200}`} {
		r := h.submit(t, "k1", body)
		require.Equal(t, http.StatusCreated, r.status, "submit %d: %s", i, r.body)
		require.Equal(t, "ignored", r.header.Get("Idempotency-Status"), "submit %d", i)
		require.Empty(t, r.header.Get("Idempotent-Replayed"), "submit %d: never a replay", i)
		require.Equal(t, "ord_00000"+string(rune('1'+i)), r.result(t)["resourceId"], "submit %d: a new order", i)
	}
	q := h.query(t, "k1")
	require.Equal(t, http.StatusOK, q.status)
	require.Equal(t, map[string]string{"state": "succeeded", "resourceId": "ord_000003", "key": "k1"}, q.result(t), "the last order")
	require.Empty(t, q.header.Get("Idempotency-Status"), "the status endpoint is not the endpoint that ignores the key")
	require.Equal(t, fakeserver.KeyStats{Effects: 3, SubmitsAfterFinal: 2}, h.srv.KeyStats("", "k1"))
	st := h.srv.Stats()
	require.Equal(t, 3, st.SideEffects)
	require.Equal(t, 3, st.MaxEffectsPerKey)
	require.Zero(t, st.Replays)
	require.Zero(t, st.Conflicts)

	r := h.do(t, call{method: http.MethodGet, path: "/_behavior"})
	require.JSONEq(t, `{"name":"key-ignored","store_errors":false,"no_body_compare":false,"conflict_status":422,"retention":"24h0m0s","key_ignored":true}`, r.body)
}

// TestKeyIgnoredFaults: the handler's answers are marked whatever fault
// shapes them (error-after-commit's 500 after the order, a decline), the
// answers of what stands in front of it (error-before-commit, throttle,
// unavailable) are not, and a lost answer's order is found by the result
// endpoint; a decline is the key's last order until a resend places
// another. Preempt's foreign order does not stop ours.
func TestKeyIgnoredFaults(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Behavior: fakeserver.KeyIgnored()})
	for _, tc := range []struct {
		kind   fakeserver.FaultKind
		status int
		marked bool
	}{
		{fakeserver.ErrorAfterCommit, http.StatusInternalServerError, true},
		{fakeserver.Decline, http.StatusPaymentRequired, true},
		{fakeserver.ErrorBeforeCommit, http.StatusInternalServerError, false},
		{fakeserver.Throttle, http.StatusTooManyRequests, false},
		{fakeserver.Unavailable, http.StatusServiceUnavailable, false},
	} {
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: tc.kind, Key: "k-" + string(tc.kind)}))
		r := h.submit(t, "k-"+string(tc.kind), `{}`)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.kind, r.body)
		if tc.marked {
			require.Equal(t, "ignored", r.header.Get("Idempotency-Status"), tc.kind)
		} else {
			require.Empty(t, r.header.Get("Idempotency-Status"), tc.kind)
		}
	}
	require.Equal(t, 1, h.srv.Effects("", "k-error-after-commit"))
	require.Zero(t, h.srv.Effects("", "k-error-before-commit"))
	require.Equal(t, "failed", h.query(t, "k-decline").result(t)["state"])
	require.Equal(t, http.StatusCreated, h.submit(t, "k-decline", `{}`).status, "a resend places a new order")
	require.Equal(t, "succeeded", h.query(t, "k-decline").result(t)["state"], "the last order")

	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.DropAfterCommit, Key: "k-drop"}))
	_, err := h.request(t.Context(), call{key: "k-drop", body: `{}`})
	require.Error(t, err, "the answer is lost")
	require.Equal(t, "succeeded", h.query(t, "k-drop").result(t)["state"], "the order lost is found")

	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Preempt, Key: "k-preempt", Delay: time.Minute}))
	r := h.submit(t, "k-preempt", `{}`)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	require.Equal(t, fakeserver.KeyStats{Effects: 1, ForeignEffects: 1}, h.srv.KeyStats("", "k-preempt"))
}

// TestKeyIgnoredTakesNoDeduplicatingKnob: key-ignored combined with a knob
// of a server that de-duplicates is refused.
func TestKeyIgnoredTakesNoDeduplicatingKnob(t *testing.T) {
	for _, b := range []fakeserver.Behavior{
		{KeyIgnored: true, StoreErrors: true},
		{KeyIgnored: true, NoBodyCompare: true},
		{KeyIgnored: true, ConflictStatus: 409},
		{KeyIgnored: true, KeyMember: "client_order_id"},
	} {
		_, err := fakeserver.New(fakeserver.Config{Behavior: b})
		require.ErrorContains(t, err, "key-ignored executes every submit", "%+v", b)
	}
	b := fakeserver.Behavior{KeyIgnored: true, Retention: time.Hour}
	require.Equal(t, "retention-1h0m0s+key-ignored", b.String())
	_, err := fakeserver.New(fakeserver.Config{Behavior: b})
	require.NoError(t, err)
}
