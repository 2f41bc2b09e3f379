package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// pagedOrders models an order API keyed by a client order id in the
// body that is free again once its order has filled (Binance's
// newClientOrderId, Kraken's cl_ord_id: see README), so every order
// sent is placed; whether the first one is placed before its connection
// drops is placed1. Its result endpoint, a list or search filtered by
// the id, answers every query with page.
type pagedOrders struct {
	placed1 bool
	page    shape

	mu        sync.Mutex
	sent      int
	placed    int
	lastQuery idem.AttemptEvent // the last result query's, as the Attempt hook saw it
}

func (o *pagedOrders) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method == http.MethodGet {
		for name, vals := range o.page.header {
			w.Header()[name] = vals
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, o.page.body)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent++
	if o.sent == 1 {
		if o.placed1 {
			o.placed++
		}
		dropConnection(w)
		return
	}
	o.placed++
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":"o-%d","client_order_id":"ord-9","status":"filled"}`, o.placed)
}

// submitLost submits ord-9 to o at default settings but for the key in
// the body and the given decoder (nil: DecodeJSON), and has Resume visit
// it once the result lag has passed. The first send's answer is lost.
func submitLost(t *testing.T, o *pagedOrders, decoder idem.Decoder) (*idem.Client, idem.Summary) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	opts := []idem.Option{idem.WithKeyInBody(), idem.WithResultEndpoint(srv.URL + "/v1/orders/search?client_order_id={key}"),
		idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
			if ev.Query {
				o.mu.Lock()
				defer o.mu.Unlock()
				o.lastQuery = ev
			}
		}})}
	if decoder != nil {
		opts = append(opts, idem.WithDecoder(decoder))
	}
	c := clientFor(t, srv, clock, opts...)
	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/v1/orders",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"client_order_id":"ord-9","symbol":"BTCUSD","side":"buy","type":"market","qty":"1"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "not before the result lag")
	require.Equal(t, idem.StateUnknown, res.State)

	clock.Advance(idem.DefaultResultLag)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	return c, sum
}

// decodeOrdersPage reads a page of orders as a decoder written for the
// first page alone does: ours in it settles, none is "not found",
// whatever the page says follows.
func decodeOrdersPage(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Orders []struct {
			ID            string `json:"id"`
			ClientOrderID string `json:"client_order_id"`
		} `json:"orders"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	for _, o := range v.Orders {
		if o.ClientOrderID == a.Key {
			return idem.Outcome{State: idem.StateSucceeded, ResourceID: o.ID}, nil
		}
	}
	if !a.Query {
		return idem.DecodeJSON(a)
	}
	return idem.Outcome{}, fmt.Errorf("no order %q on the page: %w", a.Key, idem.ErrResultNotFound)
}

// A page of a list or search that does not hold the key but says more
// follow is no "not found": the order may be on a later page (a filter
// that matched others too, or that the server ignored and answered the
// account's latest orders), or the server stopped searching before it
// found any (Google's AIP-158: a page may hold fewer results than asked,
// even none, while a next_page_token says the search goes on; "Continue
// when results are empty but the next token is nonempty", API Design
// Patterns 21.3.2). Read as a search that found nothing, the order the
// first send placed was sent again once the result lag had passed, and
// placed twice; it is asked again, never resent.
func TestResultQueryPageWithMoreToComeLetsNoResendGo(t *testing.T) {
	for _, tt := range []struct {
		name    string
		page    shape
		decoder idem.Decoder
	}{
		// https://google.aip.dev/158
		{name: "an empty page with a next_page_token", page: shape{body: `{"orders":[],"next_page_token":"CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA"}`}},
		// Stripe's search (docs.stripe.com/api/pagination/search): has_more
		// and next_page; its filter matched other orders too.
		{name: "Stripe's search, ours on a later page", page: shape{body: `{"object":"search_result","url":"/v1/payment_intents/search",` +
			`"has_more":true,"next_page":"WzE2ODA1NjQzNjFd","data":[{"id":"pi_other","object":"payment_intent","amount":100,"currency":"usd",` +
			`"status":"succeeded","metadata":{"client_order_id":"ord-8"}}]}`}},
		// Stripe's list shape (docs.stripe.com/api/pagination), an unknown
		// filter ignored: the account's latest orders, ours past them.
		{name: "a list whose filter was ignored", page: shape{body: `{"object":"list","url":"/v1/orders","has_more":true,"data":[` +
			`{"id":"o-71","client_order_id":"ord-71","status":"filled"},{"id":"o-70","client_order_id":"ord-70","status":"filled"}]}`}},
		// Bybit's order history (the README's ExampleWithDecoder_envelope):
		// nextPageCursor beside its list, read by the decoder that reads
		// the list alone.
		{name: "Bybit's nextPageCursor", decoder: decodeBybitOrder, page: shape{body: `{"retCode":0,"retMsg":"OK","result":{"category":"spot",` +
			`"nextPageCursor":"page_token%3D71588%26","list":[]},"retExtInfo":{},"time":1764936000000}`}},
		// Square's SearchOrders: a cursor, "If unset, this is the final
		// response" (developer.squareup.com/docs/working-with-apis/pagination),
		// read by a decoder that says ErrResultNotFound for an empty page.
		{name: "Square's cursor, a decoder's not found", decoder: decodeOrdersPage, page: shape{body: `{"orders":[],"cursor":"gT5sA2fpBdpXzN9"}`}},
		// Paddle Billing's meta.pagination (developer.paddle.com/api-reference/about/pagination).
		{name: "a has_more one level down", page: shape{body: `{"data":[],"meta":{"request_id":"r1","pagination":{"per_page":50,` +
			`"next":"https://api.example.com/orders?after=o-70","has_more":true,"estimated_total":120}}}`}},
		// PayPal's transaction search: page and total_pages
		// (developer.paypal.com/docs/api/transaction-search/v1).
		{name: "PayPal's page of total_pages", page: shape{body: `{"transaction_details":[],"account_number":"XZXSPECPDZHZU",` +
			`"page":1,"total_items":120,"total_pages":3}`}},
		// Laravel's paginator as JSON (laravel.com/docs/pagination,
		// "Converting Results to JSON"): current_page, last_page and
		// next_page_url beside data.
		{name: "Laravel's paginator, page 1 of 4", page: shape{body: `{"current_page":1,"data":[],"first_page_url":"https://shop.example.com/api/orders?page=1",` +
			`"from":null,"last_page":4,"last_page_url":"https://shop.example.com/api/orders?page=4","next_page_url":"https://shop.example.com/api/orders?page=2",` +
			`"path":"https://shop.example.com/api/orders","per_page":15,"prev_page_url":null,"to":null,"total":50}`}},
		// Flutterwave's meta.page_info: current_page of total_pages.
		{name: "a current_page before total_pages", page: shape{body: `{"status":"success","message":"Transactions fetched","data":[],` +
			`"meta":{"page_info":{"total":30,"current_page":1,"total_pages":3}}}`}},
		// RFC 8288's Link rel="next" (Shopify's REST lists, GitHub's).
		{name: "a Link header to the next page", page: shape{header: http.Header{"Link": {`<https://shop.example.com/admin/api/2024-10/orders.json?limit=50&page_info=eyJkaXIiOiJwcmV2In0>; rel="previous", ` +
			`<https://shop.example.com/admin/api/2024-10/orders.json?limit=50&page_info=eyJsYXN0X2lkIjo0fQ>; rel="next"`}},
			body: `{"orders":[]}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &pagedOrders{placed1: true, page: tt.page}
			c, sum := submitLost(t, o, tt.decoder)
			o.mu.Lock()
			defer o.mu.Unlock()
			require.Equal(t, 1, o.placed, "orders placed")
			require.Equal(t, 1, o.sent, "asked again, never sent again")
			require.Equal(t, idem.Summary{Visited: 1, Unknown: 1}, sum)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, op.State)
			require.True(t, o.lastQuery.Query)
			require.ErrorContains(t, o.lastQuery.Err, "pager says more follow", "the query's attempt says why it proves nothing")
		})
	}
}

// The last page of a search, or one whose pager says no more follow
// whatever else it carries (Paddle's "next" is "always returned, even
// if has_more is false"), found nothing: the order the first send never
// placed is sent again once the result lag has passed, and placed once.
func TestResultQueryLastPageLetsTheResendGo(t *testing.T) {
	for _, tt := range []struct {
		name    string
		page    shape
		decoder idem.Decoder
	}{
		{name: "Stripe's search, has_more false", page: shape{body: `{"object":"search_result","url":"/v1/payment_intents/search","has_more":false,"next_page":null,"data":[]}`}},
		{name: "Paddle's next beside has_more false", page: shape{body: `{"data":[],"meta":{"request_id":"r1","pagination":{"per_page":50,` +
			`"next":"https://api.example.com/orders?after=o-70","has_more":false,"estimated_total":0}}}`}},
		{name: "Bybit's empty nextPageCursor", decoder: decodeBybitOrder, page: shape{body: `{"retCode":0,"retMsg":"OK","result":{"category":"spot",` +
			`"nextPageCursor":"","list":[]},"retExtInfo":{},"time":1764936000000}`}},
		{name: "Square's page without a cursor", decoder: decodeOrdersPage, page: shape{body: `{"orders":[]}`}},
		{name: "PayPal's last page", page: shape{body: `{"transaction_details":[],"page":1,"total_items":0,"total_pages":1}`}},
		{name: "a null next_page_token", page: shape{body: `{"orders":[],"next_page_token":null}`}},
		{name: "Laravel's paginator, its only page", page: shape{body: `{"current_page":1,"data":[],"first_page_url":"https://shop.example.com/api/orders?page=1",` +
			`"from":null,"last_page":1,"last_page_url":"https://shop.example.com/api/orders?page=1","next_page_url":null,` +
			`"path":"https://shop.example.com/api/orders","per_page":15,"prev_page_url":null,"to":null,"total":0}`}},
		{name: "a Link header to the previous page only", page: shape{header: http.Header{"Link": {`<https://shop.example.com/orders.json?page_info=x>; rel="previous"`}},
			body: `{"orders":[]}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &pagedOrders{page: tt.page}
			c, sum := submitLost(t, o, tt.decoder)
			require.Equal(t, 1, sum.Visited)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
			require.NoError(t, err)
			o.mu.Lock()
			defer o.mu.Unlock()
			require.Equal(t, 2, o.sent, "sent again once the lag passed")
			require.Equal(t, 1, o.placed, "orders placed")
			if tt.decoder == nil {
				require.Equal(t, idem.StateSucceeded, op.State)
			}
		})
	}
}
