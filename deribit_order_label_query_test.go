package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// deribit is Deribit's JSON-RPC over HTTP: POST /api/v2/private/buy with
// the order in "params", its label the key, and GET
// /api/v2/private/get_order_state_by_label?currency=BTC&label=…, which
// answers {"jsonrpc":"2.0","result":[…]}, the recent orders with that
// label (docs.deribit.com, private/get_order_state_by_label: "for all
// orders with the specified label"). A label is not unique: Deribit
// refuses a request by label that matches more than one order (13032
// non_unique_order_label, its RPC error codes), so an earlier order may
// hold ours, here one of 10 at 85000 placed under it before. The create
// is lost before it reached the engine: no order of ours is placed.
type deribit struct {
	// ours: the create reached the engine and placed our order (40 at
	// 90000) before its answer was lost, and the label holds it alone.
	ours bool
	// placedAt: the price our order rests at, when not the params' own.
	placedAt float64
	body     string // the create's body
	// sameSize: the earlier order under the label is 40 at 90000, as
	// ours, on instrument in direction.
	sameSize              bool
	instrument, direction string

	lostCreates // the lookups by label
}

func (x *deribit) serve(w http.ResponseWriter, r *http.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	label, ok := x.lookup(w, r, "label")
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	price, amount := 85000.0, 10.0
	instrument, direction := "BTC-PERPETUAL", "buy"
	if x.sameSize {
		price, amount, instrument, direction = 90000, 40, x.instrument, x.direction
	}
	if x.ours {
		price, amount = 90000, 40
		if x.placedAt != 0 {
			price = x.placedAt
		}
	}
	_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","result":[{"time_in_force":"good_til_cancelled","reduce_only":false,"price":%.1f,`+
		`"post_only":%t,"order_type":"limit","order_state":"filled","order_id":"24516189617","max_show":10.0,`+
		`"last_update_timestamp":1764849600000,"label":%q,"is_liquidation":false,"instrument_name":%q,`+
		`"filled_amount":%.1f,"direction":%q,"creation_timestamp":1764849600000,"average_price":%.1f,"api":true,"amount":%.1f}],`+
		`"usIn":1764936000000000,"usOut":1764936000000420,"usDiff":420,"testnet":false}`, price, x.placedAt != 0, label, instrument, amount, direction, price, amount)
}

const deribitOrder = `{"jsonrpc":"2.0","id":8,"method":"private/buy","params":{"instrument_name":"BTC-PERPETUAL","amount":40,"type":"limit","price":90000,"label":"hedge-2026-12-05-0007"}}`

// A post-only buy that would take liquidity is not refused: "the price
// will be changed to be just below the spread" unless reject_post_only
// (docs.deribit.com, private/buy's post_only; nautilus_deribit's
// DeribitOrderParams: "price is adjusted to be just below the spread
// (unless reject_post_only is true)"). Ours rests at 89999.5.
const deribitPostOnlyOrder = `{"jsonrpc":"2.0","id":8,"method":"private/buy","params":{"instrument_name":"BTC-PERPETUAL","amount":40,"type":"limit","price":90000,"post_only":true,"label":"hedge-2026-12-05-0007"}}`

// decodeDeribit reads Deribit's JSON-RPC answers as a user writes it: the
// order under the key's label settles (rejected: failed), an error or a
// list without it proves nothing.
func decodeDeribit(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	if v.Error != nil {
		return idem.Outcome{}, fmt.Errorf("deribit: %d %s", v.Error.Code, v.Error.Message)
	}
	type order struct {
		OrderID string `json:"order_id"`
		State   string `json:"order_state"`
		Label   string `json:"label"`
	}
	var orders []order
	if json.Unmarshal(v.Result, &orders) != nil {
		var placed struct {
			Order order `json:"order"`
		}
		if err := json.Unmarshal(v.Result, &placed); err != nil {
			return idem.Outcome{}, err
		}
		orders = []order{placed.Order}
	}
	for _, o := range orders {
		if o.Label == a.Key && o.OrderID != "" {
			if o.State == "rejected" {
				return idem.Outcome{State: idem.StateFailed, ResourceID: o.OrderID, Reason: o.State}, nil
			}
			return idem.Outcome{State: idem.StateSucceeded, ResourceID: o.OrderID}, nil
		}
	}
	return idem.Outcome{}, fmt.Errorf("deribit: no order labelled %q", a.Key)
}

// The lookup by label answered the earlier order under it (10 at 85000,
// where ours is 40 at 90000), and the call was settled succeeded with
// that order: ours was never placed, and the caller was told it was. The
// JSON-RPC request carries the order in "params", which the comparison
// with the answer's order did not read. It is another request's: the
// operation is left unknown for a person (ReviewKeyInUse), never
// resent, never settled with that order.
func TestDeribitLabelHeldByAnEarlierOrderIsNotOurs(t *testing.T) {
	x, c, req := newDeribit(t, false)

	res, err := c.Submit(t.Context(), req)
	requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrKeyConflict, idem.ErrNeedsReview}, "", idem.ReviewKeyInUse)
	x.requireOneCreate(t, req.Key)
}

// The earlier order under the label is of our size and price, but a
// sell (private/sell: Deribit's order names its side "direction", the
// call's method says it) or on another instrument of the currency the
// lookup asks about: it was taken for ours, the call settled succeeded
// with it, ours never placed. It is another request's: ReviewKeyInUse,
// never resent.
func TestDeribitLabelHeldByAnEarlierOrderOfOurSizeIsNotOurs(t *testing.T) {
	for _, tt := range []struct{ name, instrument, direction string }{
		{"a sell", "BTC-PERPETUAL", "sell"},
		{"another instrument", "BTC-27MAR26", "buy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x, c, req := newDeribitFor(t, &deribit{sameSize: true, instrument: tt.instrument, direction: tt.direction, body: deribitOrder})

			res, err := c.Submit(t.Context(), req)
			requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrKeyConflict, idem.ErrNeedsReview}, "", idem.ReviewKeyInUse)
			x.requireOneCreate(t, req.Key)
		})
	}
}

// Our own order under the label, its amount and price the params', is
// read back and settles the call, one create.
func TestDeribitOwnOrderReadBackByLabel(t *testing.T) {
	x, c, req := newDeribit(t, true)

	res, err := c.Submit(t.Context(), req)
	requireOutcome(t, res, err, idem.StateSucceeded, nil, "24516189617", "")
	x.requireOneCreate(t, req.Key)
}

// Our post-only order, its price moved below the spread by Deribit, is
// read back under the label: its price is not the params', and it was
// taken for another request's order, left for a person (ReviewKeyInUse)
// though it is ours. The params' price of a post-only order that may be
// moved proves nothing: it settles the call, one create.
func TestDeribitOwnPostOnlyOrderMovedBelowTheSpreadIsOurs(t *testing.T) {
	x, c, req := newDeribitFor(t, &deribit{ours: true, placedAt: 89999.5, body: deribitPostOnlyOrder})

	res, err := c.Submit(t.Context(), req)
	requireOutcome(t, res, err, idem.StateSucceeded, nil, "24516189617", "")
	x.requireOneCreate(t, req.Key)
}

func newDeribit(t *testing.T, ours bool) (*deribit, *idem.Client, idem.Request) {
	t.Helper()
	return newDeribitFor(t, &deribit{ours: ours, body: deribitOrder})
}

func newDeribitFor(t *testing.T, x *deribit) (*deribit, *idem.Client, idem.Request) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeDeribit),
		idem.WithResultEndpoint(srv.URL+"/api/v2/private/get_order_state_by_label?currency=BTC&label={key}"))
	return x, c, idem.Request{Key: "hedge-2026-12-05-0007", URL: srv.URL + "/api/v2/private/buy",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(x.body)}
}

// requireOneCreate asserts that the order was sent once and every lookup
// asked for key's label.
func (x *deribit) requireOneCreate(t *testing.T, key string) {
	t.Helper()

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Equal(t, []string{x.body}, x.posts, "one create, never resent")
	require.NotEmpty(t, x.queries)
	for _, q := range x.queries {
		require.Equal(t, key, q, "every lookup by the key")
	}
}
