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

// heldIDVenue is an order API that refuses a client order id it holds
// with a 400 in its own words (refusal), and places an order for any
// other. The first create places the order and its answer is lost: the
// connection drops (Submit resends), or unavailable, a 503 its sidecar
// retries (retryingSidecar), as for krakenFutures.
type heldIDVenue struct {
	idOf        func(body []byte) string // the client order id a create carries
	refusal     func(id string) string   // the 400's body for an id held
	unavailable bool

	mu      sync.Mutex
	orders  []string // the id of each order placed
	creates []string // each create's body
}

func (x *heldIDVenue) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	id := x.idOf(b)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.creates = append(x.creates, string(b))
	w.Header().Set("Content-Type", "application/json")
	if slices.Contains(x.orders, id) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, x.refusal(id))
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

// Bitvavo's POST /v2/order: a JSON body whose clientOrderId (a UUID) is
// unique among the market's open orders, refused 400 {"errorCode":220,
// "error":"clientOrderId conflict within the market."} while the order
// under it rests (docs.bitvavo.com/docs/errors, HTTP 400 table). Its
// word is "conflict", neither "duplicate" nor "already".
const bitvavoOrder = `{"market":"BTC-EUR","side":"buy","orderType":"limit","amount":"0.1","price":"40000","clientOrderId":"2be7d0df-d5dc-4b53-a250-3376f3b393e6","operatorId":543462}`

func bitvavoRequest(base string) idem.Request {
	return idem.Request{Key: "2be7d0df-d5dc-4b53-a250-3376f3b393e6", URL: base + "/v2/order",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(bitvavoOrder)}
}

// Interactive Brokers' Client Portal (Web API) POST
// /v1/api/iserver/account/{accountId}/orders: an "orders" list whose
// cOID the gateway holds for the day, refused 400 {"error":"Order
// couldn't be submitted: Local order ID=<cOID> is already registered."}
// (the string Voyz/ibind's handle_questions matches to tell it from the
// other refusals, ibind/client/ibkr_utils.py; IBKR answers order errors
// 400 with an "error" member, Voyz/ibind#103): "already registered",
// the id itself between "order ID" and those words.
const ibkrOrder = `{"orders":[{"acctId":"U1234567","conid":265598,"cOID":"aapl-buy-20261205-7f3c9a","orderType":"LMT","price":185.5,"side":"BUY","tif":"DAY","quantity":10}]}`

func ibkrRequest(base string) idem.Request {
	return idem.Request{Key: "aapl-buy-20261205-7f3c9a", URL: base + "/v1/api/iserver/account/U1234567/orders",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(ibkrOrder)}
}

// An arbitrary cOID ("Can be some arbitrary string", the Client Portal
// OpenAPI spec's OrderRequest.cOID) holds what the refusal's words are
// split at: a dot, a colon, a slash.
const ibkrOrderDotted = `{"orders":[{"acctId":"U1234567","conid":265598,"cOID":"AAPL.buy:20261205/1","orderType":"LMT","price":185.5,"side":"BUY","tif":"DAY","quantity":10}]}`

func ibkrRequestDotted(base string) idem.Request {
	return idem.Request{Key: "AAPL.buy:20261205/1", URL: base + "/v1/api/iserver/account/U1234567/orders",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(ibkrOrderDotted)}
}

// ibkrVenue refuses a cOID it holds as Interactive Brokers does.
func ibkrVenue() *heldIDVenue {
	return &heldIDVenue{
		idOf: func(b []byte) string {
			var v struct {
				Orders []struct {
					COID string `json:"cOID"`
				} `json:"orders"`
			}
			if json.Unmarshal(b, &v) != nil || len(v.Orders) == 0 {
				return ""
			}
			return v.Orders[0].COID
		},
		refusal: func(id string) string {
			return `{"error":"Order couldn't be submitted: Local order ID=` + id + ` is already registered."}`
		},
	}
}

// heldIDVenues are the venues above, each with its request and the words
// its refusal is known by.
var heldIDVenues = []struct {
	name    string
	request func(base string) idem.Request
	body    string
	words   string
	venue   func() *heldIDVenue
}{
	{"bitvavo 220", bitvavoRequest, bitvavoOrder, "clientOrderId conflict", func() *heldIDVenue {
		return &heldIDVenue{
			idOf: func(b []byte) string {
				var v struct {
					ClientOrderID string `json:"clientOrderId"`
				}
				_ = json.Unmarshal(b, &v)
				return v.ClientOrderID
			},
			refusal: func(string) string {
				return `{"errorCode":220,"error":"clientOrderId conflict within the market."}`
			},
		}
	}},
	{"ibkr already registered", ibkrRequest, ibkrOrder, "is already registered", ibkrVenue},
	{"ibkr cOID with separators", ibkrRequestDotted, ibkrOrderDotted, "is already registered", ibkrVenue},
}

// To idem's first attempt the refusal answers its sidecar's copy, which
// placed the order: it was settled failed (a plain 400), inviting the
// order again under a new id. The order is ours: flagged for a person
// (ReviewKeyInUse), never failed nor resent.
func TestHeldClientOrderIDToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, tt := range heldIDVenues {
		t.Run(tt.name, func(t *testing.T) {
			x := tt.venue()
			x.unavailable = true
			sidecar := retryingSidecar(t, x.serve)
			c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody())

			requireLeftForAPerson(t, c, tt.request(sidecar.URL), tt.words)

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Len(t, x.orders, 1, "orders")
			require.Equal(t, []string{tt.body, tt.body}, x.creates, "copies: ours and the sidecar's, nothing resent")
		})
	}
}

// To the resend after a lost answer the same refusal is left for a
// person (ReviewRefusedAfterSend), one order, every create the same
// bytes: never ErrFailed.
func TestHeldClientOrderIDToAResendIsNoFailure(t *testing.T) {
	for _, tt := range heldIDVenues {
		t.Run(tt.name, func(t *testing.T) {
			x := tt.venue()
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
			req := tt.request(srv.URL)

			res, err := c.Submit(t.Context(), req)
			requireRefusedAfterSend(t, c, res, err, req.Key, "order held under the id")

			x.mu.Lock()
			defer x.mu.Unlock()
			require.Equal(t, []string{req.Key}, x.orders, "orders")
			require.NotEmpty(t, x.creates)
			for _, b := range x.creates {
				require.Equal(t, tt.body, b, "every create the same bytes, the key in each")
			}
		})
	}
}
