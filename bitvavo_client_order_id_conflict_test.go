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

// bitvavo is Bitvavo's POST /v2/order: a JSON body whose clientOrderId
// (a UUID) is unique among the market's open orders, refused 400
// {"errorCode":220,"error":"clientOrderId conflict within the market."}
// while the order under it rests (docs.bitvavo.com/docs/errors, HTTP 400
// table: "220 clientOrderId conflict within the market."). The refusal
// says neither "duplicate" nor "already": its word is "conflict".
//
// The first create places a resting limit order; its answer is lost as
// for krakenFutures (unavailable: a 503 its sidecar retries).
type bitvavo struct {
	unavailable bool

	mu      sync.Mutex
	orders  []string // the clientOrderId of each order placed
	creates []string
}

func (x *bitvavo) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var v struct {
		ClientOrderID string `json:"clientOrderId"`
	}
	_ = json.Unmarshal(b, &v)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.creates = append(x.creates, string(b))
	if slices.Contains(x.orders, v.ClientOrderID) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"errorCode":220,"error":"clientOrderId conflict within the market."}`)
		return
	}
	x.orders = append(x.orders, v.ClientOrderID)
	if x.unavailable {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
		return
	}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

const bitvavoOrder = `{"market":"BTC-EUR","side":"buy","orderType":"limit","amount":"0.1","price":"40000","clientOrderId":"2be7d0df-d5dc-4b53-a250-3376f3b393e6","operatorId":543462}`

func bitvavoRequest(base string) idem.Request {
	return idem.Request{Key: "2be7d0df-d5dc-4b53-a250-3376f3b393e6", URL: base + "/v2/order",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(bitvavoOrder)}
}

// To the resend after a lost answer, Bitvavo's 220 was a plain 400 and
// Submit returned ErrFailed while the order rested on the book under the
// id, inviting it again under a new one. It says the id's order exists,
// as Binance's -2010 does: left for a person, one order, every create the
// same bytes.
func TestBitvavoClientOrderIDConflictToAResendIsNoFailure(t *testing.T) {
	x := &bitvavo{}
	srv := httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
	req := bitvavoRequest(srv.URL)

	res, err := c.Submit(t.Context(), req)
	requireRefusedAfterSend(t, c, res, err, req.Key, "order resting under the id")

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Equal(t, []string{req.Key}, x.orders, "orders")
	require.NotEmpty(t, x.creates)
	for _, b := range x.creates {
		require.Equal(t, bitvavoOrder, b, "every create the same bytes, the key in each")
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy: the
// order is ours, flagged for a person (ReviewKeyInUse), never failed nor
// resent.
func TestBitvavoClientOrderIDConflictToAFirstAttemptBehindAMesh(t *testing.T) {
	x := &bitvavo{unavailable: true}
	sidecar := retryingSidecar(t, x.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody())

	requireLeftForAPerson(t, c, bitvavoRequest(sidecar.URL), "clientOrderId conflict")

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Len(t, x.orders, 1, "orders")
	require.Equal(t, []string{bitvavoOrder, bitvavoOrder}, x.creates, "copies: ours and the sidecar's, nothing resent")
}
