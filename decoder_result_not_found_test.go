package idem_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// htxExchange models HTX's spot orders by client order id: the first
// order's connection drops before it is placed; getClientOrder answers
// an id it holds no order for with its documented 200 error envelope
// (base-record-invalid, see decodeHTXOrder), and a placed one with the
// order, filled.
type htxExchange struct {
	mu     sync.Mutex
	sent   []string // the client-order-id of each order sent
	orders []string // the client-order-id of each order placed
}

func (x *htxExchange) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method == http.MethodGet {
		if id := r.URL.Query().Get("clientOrderId"); len(x.orders) > 0 && x.orders[0] == id {
			_, _ = io.WriteString(w, `{"status":"ok","data":{"id":356501383558845,"symbol":"btcusdt","account-id":100009,`+
				`"client-order-id":"`+id+`","amount":"10.000000000000000000","price":"0.0","type":"buy-market",`+
				`"field-amount":"0.000109","field-cash-amount":"9.99","source":"spot-api","state":"filled","canceled-at":0}}`)
			return
		}
		_, _ = io.WriteString(w, `{"status":"error","err-code":"base-record-invalid","err-msg":"record invalid","data":null}`)
		return
	}
	var order struct {
		ClientOrderID string `json:"client-order-id"`
	}
	_ = json.Unmarshal(b, &order)
	x.sent = append(x.sent, order.ClientOrderID)
	if len(x.sent) == 1 {
		dropConnection(w)
		return
	}
	x.orders = append(x.orders, order.ClientOrderID)
	_, _ = io.WriteString(w, `{"status":"ok","data":"356501383558845"}`)
}

// A market order whose answer was lost and that HTX never placed: its
// getClientOrder answers base-record-invalid, "no such order" in HTX's
// words, which idem alone reads as a query that failed (an error
// envelope) and never resends on, leaving the order unknown until its key
// window passes and a person looks. A Decoder that returns
// ErrResultNotFound for it has the order sent again once the result lag
// has passed, at default settings, and placed once.
func TestDecoderResultNotFoundLetsTheResendGo(t *testing.T) {
	for _, tt := range []struct {
		name    string
		decoder idem.Decoder
		settled bool
	}{
		{name: "the decoder says not found", decoder: decodeHTXOrder, settled: true},
		{name: "the decoder says nothing", settled: false, decoder: func(a *idem.Answer) (idem.Outcome, error) {
			out, err := decodeHTXOrder(a)
			if err != nil {
				return idem.Outcome{}, io.ErrUnexpectedEOF // any error but ErrResultNotFound
			}
			return out, nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := &htxExchange{}
			srv := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(srv.Close)
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(tt.decoder),
				idem.WithResultEndpoint(srv.URL+"/v1/order/orders/getClientOrder?clientOrderId={key}"))

			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/v1/order/orders/place",
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   []byte(`{"account-id":"100009","symbol":"btcusdt","type":"buy-market","amount":"10","client-order-id":"ord-9"}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "not before the result lag")
			require.Equal(t, idem.StateUnknown, res.State)

			clock.Advance(idem.DefaultResultLag)
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
			require.NoError(t, err)
			x.mu.Lock()
			defer x.mu.Unlock()
			if !tt.settled {
				require.Equal(t, idem.Summary{Visited: 1, Unknown: 1}, sum)
				require.Equal(t, idem.StateUnknown, op.State)
				require.Equal(t, []string{"ord-9"}, x.sent, "never resent")
				require.Empty(t, x.orders)
				return
			}
			require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
			require.Equal(t, idem.StateSucceeded, op.State)
			require.Equal(t, "356501383558845", op.Result.ResourceID)
			require.Equal(t, []string{"ord-9", "ord-9"}, x.sent, "resent once, under the key")
			require.Equal(t, []string{"ord-9"}, x.orders)
		})
	}
}

// hasuraOrders models an orders table served by Hasura: an order comes in
// by the insert_orders_one mutation, the first one placed but its
// connection dropped before the answer; the result endpoint, a GET of
// the caller's own in front of Hasura that passes its answer through,
// looks the order up by client_order_id while Hasura's metadata reloads,
// and gets "field 'orders' not found in type: 'query_root'"
// (hasura/graphql-engine#7366, code validation-failed), with no "data":
// a request error comes without it
// (https://spec.graphql.org/October2021/#sec-Data).
type hasuraOrders struct {
	lookup string // the lookup's answer; hasuraFieldMissing if empty

	mu     sync.Mutex
	placed int
}

// hasuraFieldMissing is Hasura's answer to a valid query while its
// metadata reloads (hasura/graphql-engine#7366).
const hasuraFieldMissing = `{"errors":[{"extensions":{"path":"$.selectionSet.orders","code":"validation-failed"},` +
	`"message":"field 'orders' not found in type: 'query_root'"}]}`

func (h *hasuraOrders) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if r.Method == http.MethodGet {
		lookup := h.lookup
		if lookup == "" {
			lookup = hasuraFieldMissing
		}
		_, _ = io.WriteString(w, lookup)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.placed++
	if h.placed == 1 {
		dropConnection(w)
		return
	}
	_, _ = io.WriteString(w, `{"data":{"insert_orders_one":{"id":"o-`+strconv.Itoa(h.placed)+`","client_order_id":"ord-9"}}}`)
}

// decodeHasuraOrder reads the mutation's order, and a lookup's list of
// orders under the key: empty, no order under it. It does not look at
// "errors" first, so an error's answer, which has no list, reads as an
// empty one.
func decodeHasuraOrder(a *idem.Answer) (idem.Outcome, error) {
	type order struct {
		ID            string `json:"id"`
		ClientOrderID string `json:"client_order_id"`
	}
	var v struct {
		Data struct {
			Placed *order  `json:"insert_orders_one"`
			Orders []order `json:"orders"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	if o := v.Data.Placed; o != nil && o.ClientOrderID == a.Key {
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: o.ID}, nil
	}
	for _, o := range v.Data.Orders {
		if o.ClientOrderID == a.Key {
			return idem.Outcome{State: idem.StateSucceeded, ResourceID: o.ID}, nil
		}
	}
	if a.Query {
		return idem.Outcome{}, fmt.Errorf("hasura: no order %q: %w", a.Key, idem.ErrResultNotFound)
	}
	return idem.Outcome{}, errors.New("hasura: no order in the answer")
}

// ErrResultNotFound is weighed as the endpoint's own 404, and a 404 whose
// "not found" is of a part of the query (the schema's field) is a query
// that failed: so is a 200 a Decoder reads as ErrResultNotFound though
// its words say the query's field is missing. Read as the order not
// found, the order placed under ord-9 was placed again once the result
// lag had passed.
func TestDecoderResultNotFoundOfAQueryPartIsAskedAgain(t *testing.T) {
	requireDecoderNotFoundAskedAgain(t, &hasuraOrders{})
}

// A GraphQL request error has no "data" (https://spec.graphql.org/October2021/#sec-Data):
// Hasura's "database query error" (hasura/graphql-engine#6489), an
// INTERNAL_SERVER_ERROR, or a server's fault in an envelope (Kraken's
// EGeneral:Internal error) searched for nothing, whatever a Decoder that
// reads its missing list as empty returns: ErrResultNotFound for it is a
// query that failed. Weighed as the endpoint's 404, the order placed
// under ord-9 was placed again once the result lag had passed.
func TestDecoderResultNotFoundOfARequestErrorIsAskedAgain(t *testing.T) {
	for name, lookup := range map[string]string{
		"a database error":                `{"errors":[{"extensions":{"path":"$","code":"unexpected"},"message":"database query error"}]}`,
		"an internal error":               `{"data":null,"errors":[{"message":"Internal error","extensions":{"code":"INTERNAL_SERVER_ERROR"}}]}`,
		"a server's fault in an envelope": `{"error":["EGeneral:Internal error"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			requireDecoderNotFoundAskedAgain(t, &hasuraOrders{lookup: lookup})
		})
	}
}

// requireDecoderNotFoundAskedAgain asserts that an order placed through
// h's GraphQL mutation, its answer lost, stays unknown past the result
// lag, its lookups read by decodeHasuraOrder: placed once, never again.
func requireDecoderNotFoundAskedAgain(t *testing.T, h *hasuraOrders) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(decodeHasuraOrder),
		idem.WithResultEndpoint(srv.URL+"/orders?client_order_id={key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/v1/graphql",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"query":"mutation($o: orders_insert_input!) { insert_orders_one(object: $o) { id client_order_id } }",` +
			`"variables":{"o":{"client_order_id":"ord-9","symbol":"BTCUSDT","side":"buy","quantity":1}}}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State)

	clock.Advance(idem.DefaultResultLag)
	requireResumeLeavesUnknown(t, c, "ord-9")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, 1, h.placed, "asked again, never sent again")
}
