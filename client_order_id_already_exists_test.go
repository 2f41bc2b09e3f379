package idem_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// krakenFutures is Kraken Futures' POST /derivatives/api/v3/sendorder
// (docs.kraken.com, Send order): a form body whose cliOrdId is unique
// across the account's history, answered 200 OK with "result":"success"
// whatever became of the order, which sendStatus.status says: "placed",
// or the refusal's name, "clientOrderIdAlreadyExist" for an id it holds
// (its sendStatus values, as JKorf/Kraken.Net's KrakenFuturesOrderPlaceStatus
// and nautilus_kraken's KrakenSendStatus list them). Its order lookup is
// a signed POST (/orders/status), so no result endpoint.
//
// The first create places a resting limit order; then lost says how its
// answer is lost: the connection dropped (Submit resends), or a 503 from
// the client's own sidecar, which sends its copy (retryingSidecar).
type krakenFutures struct {
	unavailable bool // the first create's answer: a 503 rather than a dropped connection

	mu      sync.Mutex
	orders  []string // the cliOrdId of each order placed
	creates []string // each create's body
}

func (x *krakenFutures) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(b))
	id := form.Get("cliOrdId")
	x.mu.Lock()
	defer x.mu.Unlock()
	x.creates = append(x.creates, string(b))
	if slices.Contains(x.orders, id) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":"success","sendStatus":{"status":"clientOrderIdAlreadyExist","receivedTime":"2026-12-05T11:00:00.000Z"},"serverTime":"2026-12-05T11:00:00.000Z"}`)
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

// decodeKrakenFutures reads sendorder's answer as a user writes it: the
// order placed settles it, and any other sendStatus is Kraken's refusal
// of the order, failed with its name ("result" is "success" for those
// too, so the status is all there is to read).
func decodeKrakenFutures(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		SendStatus struct {
			OrderID string `json:"order_id"`
			Status  string `json:"status"`
		} `json:"sendStatus"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case v.SendStatus.Status == "placed" && v.SendStatus.OrderID != "":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.SendStatus.OrderID}, nil
	case v.SendStatus.Status == "":
		return idem.Outcome{}, errors.New("kraken futures: no sendStatus")
	}
	return idem.Outcome{State: idem.StateFailed, Reason: v.SendStatus.Status}, nil
}

const krakenFuturesOrder = "orderType=lmt&symbol=PF_XBTUSD&side=buy&size=1&limitPrice=40000&cliOrdId=694c2b62-0e3f-412b-8249-9e67428574ca"

func krakenFuturesRequest(base string) idem.Request {
	return idem.Request{Key: "694c2b62-0e3f-412b-8249-9e67428574ca", URL: base + "/derivatives/api/v3/sendorder",
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(krakenFuturesOrder)}
}

// Kraken Futures refuses a cliOrdId it holds 200 OK with no error member,
// its refusal's name in sendStatus.status: "clientOrderIdAlreadyExist".
// To the resend after a lost answer, the decoder read it as failed and
// Submit returned ErrFailed while the order rested on the book, inviting
// it again under a new id. It says the order under the id exists, as
// Bybit's 110072 does: left for a person (ReviewRefusedAfterSend), one
// order, every create the same bytes.
func TestClientOrderIDAlreadyExistToAResendIsNoFailure(t *testing.T) {
	x := &krakenFutures{}
	srv := httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeKrakenFutures))
	req := krakenFuturesRequest(srv.URL)

	res, err := c.Submit(t.Context(), req)
	requireRefusedAfterSend(t, c, res, err, req.Key, "order resting under the id")

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Equal(t, []string{req.Key}, x.orders, "orders")
	require.Equal(t, slices.Repeat([]string{krakenFuturesOrder}, 4), x.creates, "creates")
}

// The same refusal to idem's first attempt answers its sidecar's copy
// (Istio retries a 503 reset before headers): the order is ours, flagged
// for a person (ReviewKeyInUse), never failed nor resent.
func TestClientOrderIDAlreadyExistToAFirstAttemptBehindAMesh(t *testing.T) {
	x := &krakenFutures{unavailable: true}
	sidecar := retryingSidecar(t, x.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeKrakenFutures))

	requireLeftForAPerson(t, c, krakenFuturesRequest(sidecar.URL), "clientOrderIdAlreadyExist")

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Len(t, x.orders, 1, "orders")
	require.Equal(t, []string{krakenFuturesOrder, krakenFuturesOrder}, x.creates, "copies: ours and the sidecar's, nothing resent")
}
