package idem_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// envelopeExchange is an order API that answers everything 200 OK with
// an envelope whose code says how the request went, and refuses a client
// order id it holds with such a 200 saying the id is a duplicate:
//   - Bybit v5 (bybit-exchange.github.io/docs/v5): POST /v5/order/create
//     with orderLinkId, "always unique" for derivatives and never to be
//     repeated on spot; an id sent again is {"retCode":110072,"retMsg":
//     "OrderLinkedID is duplicate"} (its error codes). GET
//     /v5/order/realtime "primarily" lists open orders, and "after a
//     server release or restart, filled, cancelled, and rejected orders
//     of Unified account should only be queried through order history"
//     (Get Open & Closed Orders): a filled market order is then an empty
//     list.
//   - OKX v5 (okx.com/docs-v5): POST /api/v5/trade/order with clOrdId; an
//     id sent again is {"code":"1","msg":"","data":[{"clOrdId":…,"ordId":
//     "","sCode":"51016","sMsg":"Duplicated clOrdId"}]}. GET
//     /api/v5/trade/order?instId=…&clOrdId=… that does not find the
//     order: {"code":"51603","msg":"Order does not exist","data":[]}.
//
// The first create places the order and its connection drops before the
// answer is out; the order fills at once, and the query never finds it.
type envelopeExchange struct {
	keyMember string                        // the body member holding the client order id
	accepted  func(n int, id string) string // a create's answer
	duplicate func(id string) string        // a create's answer for an id held
	notFound  string                        // the query's answer

	mu      sync.Mutex
	orders  []string // the client order id of each order placed
	creates []string // the client order id of each create
	queries int
}

func (x *envelopeExchange) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method == http.MethodGet {
		x.queries++
		_, _ = io.WriteString(w, x.notFound)
		return
	}
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	id, _ := body[x.keyMember].(string)
	x.creates = append(x.creates, id)
	if slices.Contains(x.orders, id) {
		_, _ = io.WriteString(w, x.duplicate(id))
		return
	}
	x.orders = append(x.orders, id)
	if len(x.creates) == 1 {
		dropConnection(w)
		return
	}
	_, _ = io.WriteString(w, x.accepted(len(x.orders), id))
}

// decodeBybit, decodeOKX and decodeKuCoin are Decoders as a user writes
// them for such APIs: the envelope's success code with the order's ids
// settles the order placed, and any other code is the exchange's refusal
// of the order (Bybit's 170131 "Insufficient balance.", OKX's 51008,
// KuCoin's 200004 "Balance insufficient!"), failed with its words: an
// API that answers every refusal 200 OK has its decoder say which ones
// fail, or none would ever settle. They read the creates' answers only:
// an order found by a query is held processing (foundOrder), and these
// tests' queries never find one.
func decodeBybit(a *idem.Answer) (idem.Outcome, error) {
	if a.Query {
		return idem.Outcome{}, errors.New("bybit: reads creates only")
	}
	var v struct {
		RetCode int    `json:"retCode"`
		RetMsg  string `json:"retMsg"`
		Result  struct {
			OrderID     string `json:"orderId"`
			OrderLinkID string `json:"orderLinkId"`
		} `json:"result"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case v.RetCode != 0:
		return idem.Outcome{State: idem.StateFailed, Reason: v.RetMsg}, nil
	case v.Result.OrderID == "" || v.Result.OrderLinkID != a.Key:
		return idem.Outcome{}, fmt.Errorf("bybit: not the order %q", a.Key)
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Result.OrderID}, nil
}

func decodeOKX(a *idem.Answer) (idem.Outcome, error) {
	if a.Query {
		return idem.Outcome{}, errors.New("okx: reads creates only")
	}
	var v struct {
		Data []struct {
			ClOrdID string `json:"clOrdId"`
			OrdID   string `json:"ordId"`
			SCode   string `json:"sCode"`
			SMsg    string `json:"sMsg"`
		} `json:"data"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case len(v.Data) != 1 || v.Data[0].ClOrdID != a.Key:
		return idem.Outcome{}, fmt.Errorf("okx: not the order %q", a.Key)
	case v.Data[0].SCode != "0":
		return idem.Outcome{State: idem.StateFailed, Reason: v.Data[0].SMsg}, nil
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data[0].OrdID}, nil
}

var decodeKuCoin = decodeCodeMsg("200000")

// decodeCodeMsg reads the {"code":…,"msg":…,"data":{"orderId":…}} envelope
// of KuCoin and Phemex (code 0, a number; its "orderID" matched as
// encoding/json matches a member): success the code they answer an order
// placed with, any other the refusal, failed with its msg.
func decodeCodeMsg(success string) idem.Decoder {
	return func(a *idem.Answer) (idem.Outcome, error) {
		var v struct {
			Code json.RawMessage `json:"code"`
			Msg  string          `json:"msg"`
			Data struct {
				OrderID string `json:"orderId"`
			} `json:"data"`
		}
		switch err := json.Unmarshal(a.Body, &v); {
		case err != nil:
			return idem.Outcome{}, err
		case strings.Trim(string(v.Code), `"`) != success:
			return idem.Outcome{State: idem.StateFailed, Reason: v.Msg}, nil
		case v.Data.OrderID == "":
			return idem.Outcome{}, fmt.Errorf("no order in %s", a.Body)
		}
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data.OrderID}, nil
	}
}

// An order API that answers every refusal 200 OK refuses a client order id
// it already holds so too: Bybit's retCode 110072 "OrderLinkedID is
// duplicate", OKX's sCode 51016 "Duplicated clOrdId". After a lost answer
// whose order the result endpoint cannot find (Bybit's realtime list
// after its restart), the resend once DefaultResultLag has passed is
// refused so, and the decoder, which must read the envelope's codes to
// settle any refusal, read it as failed: ErrFailed, which invites the
// order again under a new id, a second position. Such a refusal to a
// resend of an order that may have been placed says the order is ours,
// as Binance's 400 -2010 does: it is never failed, and a person settles
// it (ReviewRefusedAfterSend); one order, and each create under ord-9.
func TestEnvelopeDuplicateRefusalToAResendIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name, path, result string
		x                  *envelopeExchange
		body               string
		decode             idem.Decoder
	}{
		{
			name: "Bybit 110072", path: "/v5/order/create", decode: decodeBybit,
			result: "/v5/order/realtime?category=spot&symbol=BTCUSDT&orderLinkId={key}",
			body:   `{"category":"spot","symbol":"BTCUSDT","side":"Buy","orderType":"Market","qty":"0.010","orderLinkId":"ord-9"}`,
			x: &envelopeExchange{keyMember: "orderLinkId",
				accepted: func(n int, id string) string {
					return fmt.Sprintf(`{"retCode":0,"retMsg":"OK","result":{"orderId":"1f0e-%d","orderLinkId":%q},"retExtInfo":{},"time":1764936000000}`, n, id)
				},
				duplicate: func(string) string {
					return `{"retCode":110072,"retMsg":"OrderLinkedID is duplicate","result":{},"retExtInfo":{},"time":1764936000000}`
				},
				notFound: `{"retCode":0,"retMsg":"OK","result":{"category":"spot","nextPageCursor":"","list":[]},"retExtInfo":{},"time":1764936000000}`},
		},
		{
			name: "OKX 51016", path: "/api/v5/trade/order", decode: decodeOKX,
			result: "/api/v5/trade/order?instId=BTC-USDT&clOrdId={key}",
			body:   `{"instId":"BTC-USDT","tdMode":"cash","side":"buy","ordType":"market","sz":"100","clOrdId":"ord-9"}`,
			x: &envelopeExchange{keyMember: "clOrdId",
				accepted: func(n int, id string) string {
					return fmt.Sprintf(`{"code":"0","msg":"","data":[{"clOrdId":%q,"ordId":"31226986535637%d","tag":"","ts":"1764936000000","sCode":"0","sMsg":"Order placed"}],"inTime":"1764936000000000","outTime":"1764936000001000"}`, id, n)
				},
				duplicate: func(id string) string {
					return fmt.Sprintf(`{"code":"1","msg":"All operations failed","data":[{"clOrdId":%q,"ordId":"","tag":"","ts":"1764936000000","sCode":"51016","sMsg":"Duplicated clOrdId"}],"inTime":"1764936000000000","outTime":"1764936000001000"}`, id)
				},
				notFound: `{"code":"51603","msg":"Order does not exist","data":[]}`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(tt.x.serve))
			t.Cleanup(srv.Close)
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(tt.decode),
				idem.WithResultEndpoint(srv.URL+tt.result))

			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + tt.path,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(tt.body)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, idem.StateUnknown, res.State)

			// Resume, and Run's visits after it, each once the lag has
			// passed since the last send.
			for range 6 {
				clock.Advance(idem.DefaultResultLag)
				_, err := c.Resume(t.Context())
				require.NoError(t, err)
			}
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
			require.NoError(t, err)
			require.NotEqual(t, idem.StateFailed, op.State, "the order placed under ord-9 read as failed")
			require.Equal(t, idem.StateUnknown, op.State)
			require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)

			tt.x.mu.Lock()
			defer tt.x.mu.Unlock()
			require.Equal(t, []string{"ord-9"}, tt.x.orders, "orders")
			require.Equal(t, slices.Repeat([]string{"ord-9"}, 4), tt.x.creates, "creates")
		})
	}
}

// kucoinOrigin is KuCoin's POST /api/v1/orders behind the client's own
// sidecar (retryingSidecar: Istio retries a reset before headers, for
// calls out of the mesh too): the first copy places the order and its
// connection resets, and the sidecar's copy is refused 200 OK with
// {"code":"400100","msg":"validation.createOrder.clientOidDuplicated"}
// (JKorf/Kucoin.Net#120; KuCoin answers its business errors 200 OK,
// Kucoin/kucoin-python-sdk#22).
func kucoinOrigin() *heldKeys {
	return &heldKeys{
		keyOf:   jsonMember("clientOid"),
		refusal: func(string) string { return `{"code":"400100","msg":"validation.createOrder.clientOidDuplicated"}` },
	}
}

func kucoinOrderRequest(base string) idem.Request {
	return idem.Request{Key: "ord-7", URL: base + "/api/v1/orders", Body: []byte(`{"clientOid":"ord-7","side":"buy","symbol":"BTC-USDT","type":"market","funds":"100"}`),
		Header: http.Header{"Content-Type": {"application/json"}}}
}

// The 200 duplicate refusal to idem's first attempt answers the sidecar's
// copy of it: the order under the client order id is ours, and the
// decoder's "failed" (ErrFailed) would invite it again under a new id.
// It is flagged for a person, as Binance's 400 -2010 to a first attempt
// is (TestDuplicateOrderToAFirstAttemptBehindAMesh), and never resent.
func TestEnvelopeDuplicateRefusalToAFirstAttemptBehindAMesh(t *testing.T) {
	requireHeldKeyFirstAttemptForAPerson(t, kucoinOrigin(), decodeKuCoin, kucoinOrderRequest, "clientOidDuplicated")
}
