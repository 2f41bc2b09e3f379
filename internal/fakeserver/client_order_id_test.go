package fakeserver_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// The bodies of Binance's spot API (developers.binance.com, Spot API,
// "Error codes" and GET /api/v3/order), as the client-order-id preset
// answers.
const (
	duplicateOrderBody = `{"code":-2010,"msg":"Duplicate order sent."}`
	noSuchOrderBody    = `{"code":-2013,"msg":"Order does not exist."}`
)

func orderBody(id int, key, status string) string {
	return `{"symbol":"BTCUSDT","orderId":` + strconv.Itoa(id) + `,"orderListId":-1,"clientOrderId":"` + key + `","status":"` + status + `"}`
}

// TestClientOrderIDRefusesRepeats: under client-order-id the key is the
// body's client_order_id; the first order is placed, answered as Binance
// answers it, and any later order with the id, whatever its body or key
// header, is refused 400 -2010, never replayed and never placed. The result
// endpoint finds the order by its id, or answers -2013.
func TestClientOrderIDRefusesRepeats(t *testing.T) {
	h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ClientOrderID()})
	body := `{"client_order_id":"ord-7","qty":1}`
	require.Equal(t, http.StatusBadRequest, h.query(t, "ord-7").status)
	require.JSONEq(t, noSuchOrderBody, h.query(t, "ord-7").body, "no order yet")

	first := h.do(t, call{body: body})
	require.Equal(t, http.StatusOK, first.status, first.body)
	require.JSONEq(t, orderBody(1, "ord-7", "FILLED"), first.body)
	require.Equal(t, "ord-7", h.lastRequest(t).Key, "the key is the body's member")

	for _, c := range []call{
		{body: body},
		{body: `{"client_order_id":"ord-7","qty":2}`},
		{body: body, key: "other-key"}, // a header the API does not read
	} {
		r := h.do(t, c)
		require.Equal(t, http.StatusBadRequest, r.status, "%+v", c)
		require.JSONEq(t, duplicateOrderBody, r.body)
		require.Empty(t, r.header.Get("Idempotent-Replayed"), "never a replay")
	}
	q := h.query(t, "ord-7")
	require.Equal(t, http.StatusOK, q.status)
	require.JSONEq(t, orderBody(1, "ord-7", "FILLED"), q.body)
	require.Equal(t, fakeserver.KeyStats{Effects: 1, SubmitsAfterFinal: 3, Refusals: 3}, h.srv.KeyStats("", "ord-7"))
	require.Equal(t, fakeserver.KeyStats{}, h.srv.KeyStats("", "other-key"), "the header is not a key")
	st := h.srv.Stats()
	require.Equal(t, 1, st.SideEffects)
	require.Equal(t, 3, st.Refusals)
	require.Zero(t, st.Replays)
	require.Zero(t, st.Conflicts)

	// The id is held for the key window, then free: a new order.
	h.clock.Advance(fakeserver.DefaultRetention)
	require.Equal(t, http.StatusOK, h.do(t, call{body: body}).status)
	require.Equal(t, 2, h.srv.Effects("", "ord-7"))

	for _, bad := range []string{``, `{}`, `{"client_order_id":7}`, `{"client_order_id":""}`, `[1]`} {
		r := h.do(t, call{body: bad})
		require.Equal(t, http.StatusBadRequest, r.status, "body %q", bad)
		require.JSONEq(t, `{"code":-1102,"msg":"Mandatory parameter 'client_order_id' was not sent, was empty/null, or malformed."}`, r.body)
	}
}

// TestClientOrderIDFaults: the faults keep their meaning under an order
// API, in its shapes. An order lost after its commit is found by the
// result endpoint and its id refused; one resting (slow-processing) is
// "NEW", then "FILLED"; query lag hides it behind -2013; a declined or
// rejected order is never placed, so its id stays free.
func TestClientOrderIDFaults(t *testing.T) {
	body := `{"client_order_id":"ord-1"}`
	t.Run("drop-after-commit", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ClientOrderID()})
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.DropAfterCommit}))
		_, err := h.request(t.Context(), call{body: body})
		require.Error(t, err, "no answer")
		require.JSONEq(t, orderBody(1, "ord-1", "FILLED"), h.query(t, "ord-1").body)
		require.JSONEq(t, duplicateOrderBody, h.do(t, call{body: body}).body)
		require.Equal(t, 1, h.srv.Effects("", "ord-1"))
	})
	t.Run("error-after-commit", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ClientOrderID()})
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.ErrorAfterCommit}))
		require.Equal(t, http.StatusInternalServerError, h.do(t, call{body: body}).status)
		require.JSONEq(t, duplicateOrderBody, h.do(t, call{body: body}).body, "placed: the id is taken")
		require.Equal(t, 1, h.srv.Effects("", "ord-1"))
	})
	t.Run("slow-processing", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ClientOrderID()})
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.SlowProcessing, Delay: 5 * time.Second}))
		r := h.do(t, call{body: body})
		require.Equal(t, http.StatusOK, r.status)
		require.JSONEq(t, orderBody(1, "ord-1", "NEW"), r.body)
		require.JSONEq(t, duplicateOrderBody, h.do(t, call{body: body}).body, "an open order's id")
		require.JSONEq(t, orderBody(1, "ord-1", "NEW"), h.query(t, "ord-1").body)
		h.clock.Advance(5 * time.Second)
		require.JSONEq(t, orderBody(1, "ord-1", "FILLED"), h.query(t, "ord-1").body)
	})
	t.Run("query-lag", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ClientOrderID()})
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.QueryLag, Delay: 5 * time.Second}))
		require.Equal(t, http.StatusOK, h.do(t, call{body: body}).status)
		require.JSONEq(t, noSuchOrderBody, h.query(t, "ord-1").body, "not seen yet")
		h.clock.Advance(5 * time.Second)
		require.Equal(t, http.StatusOK, h.query(t, "ord-1").status)
	})
	for _, tt := range []struct {
		kind   fakeserver.FaultKind
		status int
		body   string
	}{
		{fakeserver.Decline, http.StatusBadRequest, `{"code":-2010,"msg":"Account has insufficient balance for requested action."}`},
		{fakeserver.Reject409, http.StatusBadRequest, `{"code":-2010,"msg":"Order would immediately match and take."}`},
	} {
		t.Run(string(tt.kind), func(t *testing.T) {
			h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ClientOrderID()})
			require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: tt.kind}))
			r := h.do(t, call{body: body})
			require.Equal(t, tt.status, r.status)
			require.JSONEq(t, tt.body, r.body)
			require.JSONEq(t, noSuchOrderBody, h.query(t, "ord-1").body, "never placed")
			require.Zero(t, h.srv.Effects("", "ord-1"))
			r = h.do(t, call{body: body})
			require.Equal(t, http.StatusOK, r.status, "the id is free: %s", r.body)
			require.Equal(t, fakeserver.KeyStats{Effects: 1}, h.srv.KeyStats("", "ord-1"), "a new order, no resend of a final answer")
		})
	}
	t.Run("preempt", func(t *testing.T) {
		h := newHarness(t, fakeserver.Config{Behavior: fakeserver.ClientOrderID()})
		require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Preempt, Delay: time.Second}))
		require.JSONEq(t, duplicateOrderBody, h.do(t, call{body: body}).body, "someone else's order holds the id")
		require.Equal(t, fakeserver.KeyStats{ForeignEffects: 1, Refusals: 1}, h.srv.KeyStats("", "ord-1"))
	})
}

// TestClientOrderIDCombinations: an order API replays nothing, so the
// knobs of a replaying middleware are refused beside it.
func TestClientOrderIDCombinations(t *testing.T) {
	for _, b := range []fakeserver.Behavior{
		{KeyMember: "client_order_id", StoreErrors: true},
		{KeyMember: "client_order_id", NoBodyCompare: true},
		{KeyMember: "client_order_id", ConflictStatus: 409},
	} {
		_, err := fakeserver.New(fakeserver.Config{Behavior: b})
		require.ErrorContains(t, err, `key member "client_order_id" is an order API that never replays`)
	}
	b := fakeserver.Behavior{KeyMember: "clientOid", Retention: time.Hour}
	require.Equal(t, "retention-1h0m0s+key-member-clientOid", b.String())
	_, err := fakeserver.New(fakeserver.Config{Behavior: b})
	require.NoError(t, err)
}

// TestClientOrderIDOpenOnly: with OpenOnly an id is refused only while its
// order is open (resting under slow-processing); once filled, the same id
// places a second order, as on Binance, whose newClientOrderId is "a
// unique id among open orders".
func TestClientOrderIDOpenOnly(t *testing.T) {
	b := fakeserver.ClientOrderID()
	b.Name, b.OpenOnly = "", true
	require.Equal(t, "key-member-client_order_id+open-only", b.String())
	h := newHarness(t, fakeserver.Config{Behavior: b})
	body := `{"client_order_id":"ord-1"}`
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.SlowProcessing, Delay: 5 * time.Second}))
	require.JSONEq(t, orderBody(1, "ord-1", "NEW"), h.do(t, call{body: body}).body)
	require.JSONEq(t, duplicateOrderBody, h.do(t, call{body: body}).body, "open: refused")
	h.clock.Advance(5 * time.Second)
	r := h.do(t, call{body: body})
	require.JSONEq(t, orderBody(2, "ord-1", "FILLED"), r.body, "filled: the id is free")
	require.JSONEq(t, orderBody(2, "ord-1", "FILLED"), h.query(t, "ord-1").body, "the query finds the latest")
	require.Equal(t, 2, h.srv.Effects("", "ord-1"))
	require.Equal(t, 2, h.srv.Stats().MaxEffectsPerKey)

	_, err := fakeserver.New(fakeserver.Config{Behavior: fakeserver.Behavior{OpenOnly: true}})
	require.ErrorContains(t, err, "open-only frees a client order id once its order fills: it needs a key member")
}

// TestClientOrderIDOpenOnlyStillRunning: an order still running is open,
// so under OpenOnly its id is refused, not placed a second time, and the
// order query does not find it until it has committed. The first request
// is answered after its (real) delay; the server's clock, unmoved, still
// has it running.
func TestClientOrderIDOpenOnlyStillRunning(t *testing.T) {
	b := fakeserver.ClientOrderID()
	b.OpenOnly = true
	h := newHarness(t, fakeserver.Config{Behavior: b})
	body := `{"client_order_id":"ord-1"}`
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.StillRunning, Delay: 20 * time.Millisecond}))
	require.JSONEq(t, orderBody(1, "ord-1", "FILLED"), h.do(t, call{body: body}).body)
	require.JSONEq(t, duplicateOrderBody, h.do(t, call{body: body}).body, "running: refused")
	require.JSONEq(t, noSuchOrderBody, h.query(t, "ord-1").body, "running: not committed")
	require.Equal(t, fakeserver.KeyStats{Effects: 1, Refusals: 1}, h.srv.KeyStats("", "ord-1"))
	h.clock.Advance(20 * time.Millisecond)
	require.JSONEq(t, orderBody(1, "ord-1", "FILLED"), h.query(t, "ord-1").body, "committed")
}
