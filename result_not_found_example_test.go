package idem_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/idemkit/idem"
)

// decodeHTXOrder reads HTX's spot orders: the answer to POST
// /v1/order/orders/place ({"status":"ok","data":"<order id>"}) and to GET
// /v1/order/orders/getClientOrder?clientOrderId=… (the order under
// "data", its "client-order-id" the key). HTX answers a client order id
// it holds no order for 200 OK, {"status":"error","err-code":
// "base-record-invalid","err-msg":"record invalid","data":null} (its
// Spot API's "Get the Order Detail of an Order based on Client Order
// ID", quoted in ccxt/ccxt#5750): an error envelope, which idem alone
// reads as a query that failed and asks again, never resending. Read as
// ErrResultNotFound it is the endpoint's "no such order".
func decodeHTXOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Status  string          `json:"status"`
		ErrCode string          `json:"err-code"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, fmt.Errorf("htx: %w", err)
	}
	switch {
	case a.Query && v.Status == "error" && v.ErrCode == "base-record-invalid":
		return idem.Outcome{}, fmt.Errorf("htx: client order id %q: %w", a.Key, idem.ErrResultNotFound)
	case v.Status != "ok":
		// Any other error (a signature, a rate limit) proves nothing.
		return idem.Outcome{}, fmt.Errorf("htx: %s %s settles nothing", v.Status, v.ErrCode)
	}
	var placed string
	if !a.Query && json.Unmarshal(v.Data, &placed) == nil && placed != "" {
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: placed}, nil
	}
	var o struct {
		ID            int64  `json:"id"`
		ClientOrderID string `json:"client-order-id"`
		State         string `json:"state"`
	}
	if err := json.Unmarshal(v.Data, &o); err != nil || o.ID <= 0 || o.ClientOrderID != a.Key {
		return idem.Outcome{}, fmt.Errorf("htx: not the order with client-order-id %q", a.Key)
	}
	// Placed, whatever became of it since: filled, or cancelled later.
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: strconv.FormatInt(o.ID, 10)}, nil
}

// A Decoder whose result endpoint says "no such request" in words of
// its own returns ErrResultNotFound: idem then weighs the answer as the
// endpoint's 404, and resends the request with its key once the read
// path has had time to catch up (WithResultLag). A plain error leaves
// the answer to idem's own reading: HTX's other errors, in the same
// error envelope, are a query that failed, asked again.
func ExampleErrResultNotFound() {
	_ = []idem.Option{idem.WithKeyInBody(), idem.WithDecoder(decodeHTXOrder),
		idem.WithResultEndpoint("https://api.huobi.pro/v1/order/orders/getClientOrder?clientOrderId={key}")}
	for _, body := range []string{
		`{"status":"ok","data":{"id":356501383558845,"symbol":"btcusdt","client-order-id":"ord-9","state":"filled"}}`,
		`{"status":"error","err-code":"base-record-invalid","err-msg":"record invalid","data":null}`,
		`{"status":"error","err-code":"api-signature-not-valid","err-msg":"Signature not valid","data":null}`,
	} {
		out, err := decodeHTXOrder(&idem.Answer{Key: "ord-9", Query: true, StatusCode: http.StatusOK, Body: []byte(body)})
		switch {
		case errors.Is(err, idem.ErrResultNotFound):
			fmt.Println("not found:", err)
		case err != nil:
			fmt.Println("proves nothing:", err)
		default:
			fmt.Printf("%s %q\n", out.State, out.ResourceID)
		}
	}
	// Output:
	// succeeded "356501383558845"
	// not found: htx: client order id "ord-9": idem: the result endpoint holds nothing for the key
	// proves nothing: htx: error api-signature-not-valid settles nothing
}
