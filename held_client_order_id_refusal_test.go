package idem_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemkit/idem"
)

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
func ibkrVenue() *heldKeys {
	return &heldKeys{
		status: http.StatusBadRequest,
		keyOf: func(b []byte) string {
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
	words   string
	venue   func() *heldKeys
}{
	{"bitvavo 220", bitvavoRequest, "clientOrderId conflict", func() *heldKeys {
		return &heldKeys{
			status: http.StatusBadRequest,
			keyOf:  jsonMember("clientOrderId"),
			refusal: func(string) string {
				return `{"errorCode":220,"error":"clientOrderId conflict within the market."}`
			},
		}
	}},
	{"ibkr already registered", ibkrRequest, "is already registered", ibkrVenue},
	{"ibkr cOID with separators", ibkrRequestDotted, "is already registered", ibkrVenue},
}

// To idem's first attempt the refusal answers its sidecar's copy, which
// placed the order: it was settled failed (a plain 400), inviting the
// order again under a new id. The order is ours: flagged for a person
// (ReviewKeyInUse), never failed nor resent.
func TestHeldClientOrderIDToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, tt := range heldIDVenues {
		t.Run(tt.name, func(t *testing.T) {
			requireHeldKeyFirstAttemptForAPerson(t, tt.venue(), nil, tt.request, tt.words)
		})
	}
}

// To the resend after a lost answer the same refusal is left for a
// person (ReviewRefusedAfterSend), one order, every create the same
// bytes: never ErrFailed.
func TestHeldClientOrderIDToAResendIsNoFailure(t *testing.T) {
	for _, tt := range heldIDVenues {
		t.Run(tt.name, func(t *testing.T) {
			requireHeldKeyResendForAPerson(t, tt.venue(), nil, tt.request)
		})
	}
}
