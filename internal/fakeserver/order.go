package fakeserver

import (
	"encoding/json"
	"net/http"
	"time"
)

// The codes and words of an order API's errors (Behavior.KeyMember), as
// Binance's spot API sends them (developers.binance.com, Spot API, "Error
// codes": -1102 MANDATORY_PARAM_EMPTY_OR_MALFORMED, -2010 NEW_ORDER_REJECTED,
// -2013 NO_SUCH_ORDER).
const (
	codeMandatory = -1102
	codeRejected  = -2010
	codeNoOrder   = -2013

	msgDuplicateOrder = "Duplicate order sent."
	msgNoOrder        = "Order does not exist."
	msgNoBalance      = "Account has insufficient balance for requested action."
	msgWouldMatch     = "Order would immediately match and take."
)

// orderSymbol is the market of every order of the order API.
const orderSymbol = "BTCUSDT"

// orderErrorJSON is Binance's error body.
type orderErrorJSON struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

// orderJSON is Binance's order, as POST /api/v3/order (newOrderRespType
// RESULT) and GET /api/v3/order answer it.
type orderJSON struct {
	Symbol        string `json:"symbol"`
	OrderID       int    `json:"orderId"`
	OrderListID   int    `json:"orderListId"`
	ClientOrderID string `json:"clientOrderId"`
	Status        string `json:"status"`
}

func orderError(status, code int, msg string) answer {
	status, body := encodeJSON(status, orderErrorJSON{Code: code, Msg: msg})
	return answer{status: status, body: body}
}

// rejectOrder logs req and answers it with an order API's error.
func (s *Server) rejectOrder(w http.ResponseWriter, req Request, status, code int, msg string) {
	req.Status = status
	s.mu.Lock()
	s.logLocked(req, classSubmit)
	s.mu.Unlock()
	a := orderError(status, code, msg)
	writeJSON(w, a.status, a.body)
}

// memberKey returns the string value of body's top-level JSON member
// named member, or "" if body is no JSON object or the member is missing
// or no string.
func memberKey(body []byte, member string) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return ""
	}
	var key string
	if json.Unmarshal(fields[member], &key) != nil {
		return ""
	}
	return key
}

// orderBody returns the placed order e as the order API reports it at
// now: resting ("NEW") while processing, then "FILLED".
func (e *entry) orderBody(now time.Time) answer {
	status := "FILLED"
	if e.processing(now) || e.running(now) {
		status = "NEW"
	}
	var a answer
	a.status, a.body = encodeJSON(http.StatusOK, orderJSON{
		Symbol: orderSymbol, OrderID: e.orderID, OrderListID: -1, ClientOrderID: e.sk.key, Status: status,
	})
	return a
}

// orderAnswer is an order API's answer to the submit that committed e: the
// order placed, or the refusal of one never placed.
func (e *entry) orderAnswer(now time.Time) answer {
	if e.state == stateFailed {
		// Binance refuses every new order with 400 -2010, whatever the
		// reason: the reject-409 fault, a refusal for the book's state,
		// takes its LIMIT_MAKER words, not a 409, which no order API of
		// this kind sends for a refused order and which clients read as
		// a request in flight.
		msg := msgNoBalance
		if e.failStatus == http.StatusConflict {
			msg = msgWouldMatch
		}
		return orderError(http.StatusBadRequest, codeRejected, msg)
	}
	return e.orderBody(now)
}

// orderQueryAnswer is an order API's answer to a query for e (nil if the
// id is unknown): the order, or -2013 while there is none to see.
func orderQueryAnswer(e *entry, now time.Time) answer {
	if e == nil || e.state == stateFailed || e.hidden(now) {
		return orderError(http.StatusBadRequest, codeNoOrder, msgNoOrder)
	}
	return e.orderBody(now)
}
