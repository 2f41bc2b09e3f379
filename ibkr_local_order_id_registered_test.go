package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// ibkrGateway is Interactive Brokers' Client Portal (Web API) POST
// /v1/api/iserver/account/{accountId}/orders: an "orders" list whose
// cOID, the customer order id, the gateway holds for the day. An id it
// holds is refused 400 {"error":"Order couldn't be submitted: Local order
// ID=<cOID> is already registered."} (the string Voyz/ibind's
// handle_questions matches to tell such a refusal from the others,
// ibind/client/ibkr_utils.py; IBKR answers its order errors 400 with an
// "error" member, Voyz/ibind#103). The words say "already registered",
// with the id itself between "order ID" and them.
//
// The first create places the order; its answer is lost as for
// krakenFutures (unavailable: a 503 its sidecar retries).
type ibkrGateway struct {
	unavailable bool

	mu      sync.Mutex
	orders  []string // the cOID of each order placed
	creates []string
}

func (x *ibkrGateway) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var v struct {
		Orders []struct {
			COID string `json:"cOID"`
		} `json:"orders"`
	}
	_ = json.Unmarshal(b, &v)
	id := ""
	if len(v.Orders) > 0 {
		id = v.Orders[0].COID
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.creates = append(x.creates, string(b))
	w.Header().Set("Content-Type", "application/json")
	if slices.Contains(x.orders, id) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"Order couldn't be submitted: Local order ID=`+id+` is already registered."}`)
		return
	}
	x.orders = append(x.orders, id)
	if x.unavailable {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
		return
	}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

const ibkrOrder = `{"orders":[{"acctId":"U1234567","conid":265598,"cOID":"aapl-buy-20261205-7f3c9a","orderType":"LMT","price":185.5,"side":"BUY","tif":"DAY","quantity":10}]}`

func ibkrRequest(base string) idem.Request {
	return idem.Request{Key: "aapl-buy-20261205-7f3c9a", URL: base + "/v1/api/iserver/account/U1234567/orders",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(ibkrOrder)}
}

// To idem's first attempt the refusal answers its sidecar's copy, which
// placed the order: it was settled failed (a plain 400), inviting the
// order again under a new cOID. The order is ours: flagged for a person
// (ReviewKeyInUse), never failed nor resent.
func TestIBKRLocalOrderIDRegisteredToAFirstAttemptBehindAMesh(t *testing.T) {
	x := &ibkrGateway{unavailable: true}
	sidecar := retryingSidecar(t, x.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody())

	requireLeftForAPerson(t, c, ibkrRequest(sidecar.URL), "is already registered")

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Len(t, x.orders, 1, "orders")
	require.Equal(t, []string{ibkrOrder, ibkrOrder}, x.creates, "copies: ours and the sidecar's, nothing resent")
}

// To the resend after a lost answer the same refusal is left for a
// person (ReviewRefusedAfterSend), one order, every create the same
// bytes: never ErrFailed.
func TestIBKRLocalOrderIDRegisteredToAResendIsNoFailure(t *testing.T) {
	x := &ibkrGateway{}
	srv := httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
	req := ibkrRequest(srv.URL)

	res, err := c.Submit(t.Context(), req)
	requireRefusedAfterSend(t, c, res, err, req.Key, "order registered under the cOID")

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Equal(t, []string{req.Key}, x.orders, "orders")
	require.NotEmpty(t, x.creates)
	for _, b := range x.creates {
		require.Equal(t, ibkrOrder, b, "every create the same bytes, the key in each")
	}
}
