package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/idemkit/idem"
)

// decodeAdyen reads the payment result of Adyen's /payments: no "id" and
// no "state", but a "resultCode" and the payment's "pspReference"
// (https://docs.adyen.com/online-payments/build-your-integration/payment-result-codes).
func decodeAdyen(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		PSPReference  string `json:"pspReference"`
		ResultCode    string `json:"resultCode"`
		RefusalReason string `json:"refusalReason"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, fmt.Errorf("adyen: %w", err)
	}
	switch v.ResultCode {
	case "Authorised":
		if v.PSPReference == "" {
			return idem.Outcome{}, fmt.Errorf("adyen: %s without a pspReference", v.ResultCode)
		}
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.PSPReference}, nil
	case "Refused", "Cancelled":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.PSPReference, Reason: v.ResultCode + ": " + v.RefusalReason}, nil
	case "Pending", "Received", "RedirectShopper", "IdentifyShopper", "ChallengeShopper", "PresentToShopper":
		// The payment waits for its method or for the shopper: Adyen's
		// webhook settles it (Client.Confirm).
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.PSPReference}, nil
	}
	// "Error" (final to Adyen, but an error of the processing, not a
	// refusal), "PartiallyAuthorised", a code added later: nothing this
	// decoder settles on. idem asks again, never takes it for an outcome,
	// and the webhook or a person settles it.
	return idem.Outcome{}, fmt.Errorf("adyen: resultCode %q settles nothing", v.ResultCode)
}

// DecodeJSON does not read Adyen's payment results: they carry neither
// "state" nor "id", so a client with the default decoder leaves every
// Adyen payment unknown, never settled. A Decoder that reads
// "resultCode" settles them; pass it with WithDecoder. Adyen's result
// codes are its own words, several of them neither success nor failure,
// so the default decoder does not guess at them.
func ExampleWithDecoder_adyen() {
	_ = idem.WithDecoder(decodeAdyen) // with idem.New or idem.Open
	for _, body := range []string{
		`{"pspReference":"993617895204576J","resultCode":"Authorised","amount":{"currency":"EUR","value":1000}}`,
		`{"pspReference":"V4HZ4RBFJGXXGN82","resultCode":"Refused","refusalReason":"Not enough balance","refusalReasonCode":"12"}`,
		`{"resultCode":"RedirectShopper","action":{"type":"redirect","url":"https://checkoutshopper-test.adyen.com/"}}`,
		`{"pspReference":"881617895204577B","resultCode":"Error","refusalReason":"Acquirer Error"}`,
	} {
		out, err := decodeAdyen(&idem.Answer{StatusCode: http.StatusOK, Body: []byte(body)})
		if err != nil {
			fmt.Println("proves nothing:", err)
			continue
		}
		fmt.Printf("%s %q %q\n", out.State, out.ResourceID, out.Reason)
	}
	// Output:
	// succeeded "993617895204576J" ""
	// failed "V4HZ4RBFJGXXGN82" "Refused: Not enough balance"
	// processing "" ""
	// proves nothing: adyen: resultCode "Error" settles nothing
}

// decodeSpotOrder reads an order of Binance's spot API, the answer to
// POST /api/v3/order and to GET /api/v3/order?origClientOrderId=…: its
// "orderId", "clientOrderId" and "status", no "id" and no "state"
// (developers.binance.com, Spot API, Trading endpoints and ENUM
// definitions). The client order id is the key (WithKeyInBody).
func decodeSpotOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		OrderID       int64  `json:"orderId"`
		ClientOrderID string `json:"clientOrderId"`
		Status        string `json:"status"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, fmt.Errorf("binance: %w", err)
	}
	if v.OrderID <= 0 || v.ClientOrderID != a.Key {
		// A client order id is unique among open orders only: another
		// order's answer, or none, says nothing of this one.
		return idem.Outcome{}, fmt.Errorf("binance: not the order with clientOrderId %q", a.Key)
	}
	id := strconv.FormatInt(v.OrderID, 10)
	switch v.Status {
	case "REJECTED":
		// "The order was not accepted by the engine and not processed."
		return idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: v.Status}, nil
	case "PENDING_NEW":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: id}, nil
	case "", "NEW", "PARTIALLY_FILLED", "FILLED", "CANCELED", "PENDING_CANCEL", "EXPIRED", "EXPIRED_IN_MATCH":
		// Placed ("" is the ACK answer, which gives no status). Cancelled
		// or expired later, by a person or by its time in force, it was
		// still placed: "failed" would invite placing it again.
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, nil
	}
	return idem.Outcome{}, fmt.Errorf("binance: status %q settles nothing", v.Status)
}

// An exchange whose key is a client order id unique among open orders
// only (Binance's newClientOrderId) answers its order in a shape of its
// own, which DecodeJSON does not read: the result query finds the order,
// and idem keeps the operation processing and never resends it, but
// cannot settle it. A Decoder that reads the order settles it, and
// refuses another order's answer. The query's symbol must be the
// order's: for another symbol Binance answers -2013 "Order does not
// exist.", which is read as the order missing and lets a resend go. An
// application trading several symbols sets each Request's ResultURL.
func ExampleWithDecoder_clientOrderID() {
	_ = []idem.Option{idem.WithKeyInBody(), idem.WithDecoder(decodeSpotOrder),
		idem.WithResultEndpoint("https://api.binance.com/api/v3/order?symbol=BTCUSDT&origClientOrderId={key}")}
	for _, body := range []string{
		`{"symbol":"BTCUSDT","orderId":28,"orderListId":-1,"clientOrderId":"ord-9","status":"FILLED","type":"MARKET","side":"BUY"}`,
		`{"symbol":"BTCUSDT","orderId":29,"orderListId":-1,"clientOrderId":"ord-9","status":"EXPIRED","type":"LIMIT","timeInForce":"IOC"}`,
		`{"symbol":"BTCUSDT","orderId":30,"orderListId":-1,"clientOrderId":"ord-9","status":"REJECTED"}`,
		`{"symbol":"BTCUSDT","orderId":31,"orderListId":-1,"clientOrderId":"ord-10","status":"FILLED"}`,
	} {
		out, err := decodeSpotOrder(&idem.Answer{Key: "ord-9", Query: true, StatusCode: http.StatusOK, Body: []byte(body)})
		if err != nil {
			fmt.Println("proves nothing:", err)
			continue
		}
		fmt.Printf("%s %q %q\n", out.State, out.ResourceID, out.Reason)
	}
	// Output:
	// succeeded "28" ""
	// succeeded "29" ""
	// failed "30" "REJECTED"
	// proves nothing: binance: not the order with clientOrderId "ord-9"
}

// decodeBybitOrder reads Bybit's v5 order API, which answers everything
// 200 OK in an envelope whose "retCode" says how the request went
// (bybit-exchange.github.io/docs/v5): POST /v5/order/create's
// {"retCode":0,"result":{"orderId":…,"orderLinkId":…}}, and GET
// /v5/order/history?orderLinkId=…'s orders in "result"."list", an empty
// list for none. The orderLinkId is the key (WithKeyInBody).
func decodeBybitOrder(a *idem.Answer) (idem.Outcome, error) {
	type order struct {
		OrderID     string `json:"orderId"`
		OrderLinkID string `json:"orderLinkId"`
		OrderStatus string `json:"orderStatus"`
	}
	var v struct {
		RetCode int    `json:"retCode"`
		RetMsg  string `json:"retMsg"`
		Result  struct {
			order
			List []order `json:"list"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, fmt.Errorf("bybit: %w", err)
	}
	switch v.RetCode {
	case 0:
	case 170131: // "Insufficient balance.": refused, nothing placed
		return idem.Outcome{State: idem.StateFailed, Reason: v.RetMsg}, nil
	default:
		// A limit reached (10006), a timeout of Bybit's own (10000,
		// 10016), a code added later: no word on the order. idem asks
		// again, never settles on it. (A create refused as a duplicate,
		// 110072, is read by idem itself: the order may be ours.)
		return idem.Outcome{}, fmt.Errorf("bybit: retCode %d %q settles nothing", v.RetCode, v.RetMsg)
	}
	if !a.Query {
		// The create was taken: the order is checked by the result
		// endpoint, which says how it went.
		if v.Result.OrderID == "" || v.Result.OrderLinkID != a.Key {
			return idem.Outcome{}, fmt.Errorf("bybit: not the order %q", a.Key)
		}
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.Result.OrderID}, nil
	}
	i := slices.IndexFunc(v.Result.List, func(o order) bool { return o.OrderLinkID == a.Key })
	if i < 0 {
		// An empty list: a search that found nothing (idem resends only
		// once WithResultLag has passed).
		return idem.Outcome{}, fmt.Errorf("bybit: no order %q", a.Key)
	}
	o := v.Result.List[i]
	switch o.OrderStatus {
	case "Rejected":
		return idem.Outcome{State: idem.StateFailed, ResourceID: o.OrderID, Reason: o.OrderStatus}, nil
	case "Created":
		// Taken by the system, not yet by the matching engine.
		return idem.Outcome{State: idem.StateProcessing, ResourceID: o.OrderID}, nil
	case "New", "PartiallyFilled", "Filled", "Cancelled", "PartiallyFilledCanceled", "Untriggered", "Triggered", "Deactivated":
		// Placed. Cancelled later, it was still placed: "failed" would
		// invite placing it again.
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: o.OrderID}, nil
	}
	return idem.Outcome{}, fmt.Errorf("bybit: orderStatus %q settles nothing", o.OrderStatus)
}

// An exchange that answers everything 200 OK in an envelope (Bybit, OKX,
// KuCoin) has its decoder read the envelope's code: the code of success
// with the order settles it, a code that refuses the order outright
// fails it, and any other code proves nothing, so that idem asks again
// rather than settle on a limit reached or an error of the exchange's
// own. Give the result endpoint that finds filled orders too (Bybit's
// order history; its realtime list loses them when Bybit restarts).
func ExampleWithDecoder_envelope() {
	_ = []idem.Option{idem.WithKeyInBody(), idem.WithDecoder(decodeBybitOrder),
		idem.WithResultEndpoint("https://api.bybit.com/v5/order/history?category=spot&orderLinkId={key}")}
	for _, tt := range []struct {
		query bool
		body  string
	}{
		{false, `{"retCode":0,"retMsg":"OK","result":{"orderId":"1321003749386327552","orderLinkId":"ord-9"},"retExtInfo":{},"time":1764936000000}`},
		{false, `{"retCode":170131,"retMsg":"Insufficient balance.","result":{},"retExtInfo":{},"time":1764936000000}`},
		{false, `{"retCode":10006,"retMsg":"Too many visits","result":{},"retExtInfo":{},"time":1764936000000}`},
		{true, `{"retCode":0,"retMsg":"OK","result":{"list":[{"orderId":"1321003749386327552","orderLinkId":"ord-9","orderStatus":"Filled"}],"nextPageCursor":"","category":"spot"},"retExtInfo":{},"time":1764936000000}`},
		{true, `{"retCode":0,"retMsg":"OK","result":{"list":[],"nextPageCursor":"","category":"spot"},"retExtInfo":{},"time":1764936000000}`},
	} {
		out, err := decodeBybitOrder(&idem.Answer{Key: "ord-9", Query: tt.query, StatusCode: http.StatusOK, Body: []byte(tt.body)})
		if err != nil {
			fmt.Println("proves nothing:", err)
			continue
		}
		fmt.Printf("%s %q %q\n", out.State, out.ResourceID, out.Reason)
	}
	// Output:
	// processing "1321003749386327552" ""
	// failed "" "Insufficient balance."
	// proves nothing: bybit: retCode 10006 "Too many visits" settles nothing
	// succeeded "1321003749386327552" ""
	// proves nothing: bybit: no order "ord-9"
}
