package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// payuOrder is one order PayU GPO holds, as its order retrieve answers it.
type payuOrder struct {
	OrderID      string `json:"orderId"`
	ExtOrderID   string `json:"extOrderId"`
	CurrencyCode string `json:"currencyCode"`
	TotalAmount  string `json:"totalAmount"`
	Status       string `json:"status"`
}

// payuRetrieve is PayU GPO (modelled) for an order charged at once with a
// stored card token: POST /api/v2_1/orders makes the order COMPLETED, or
// refuses an extOrderId it holds (400 ERROR_ORDER_NOT_UNIQUE,
// order_not_unique_code_test.go); either answer is lost, the connection
// closed after the server acted. Its order retrieve answers in
// OrderRetrieveResponse's shape, the order wrapped in a list:
// {"orders": [{"orderId", "extOrderId", "currencyCode", "totalAmount",
// "status"}], "status": {"statusCode": "SUCCESS"}} (developers.payu.com,
// REST API, Retrieving order data), here asked by the merchant's
// extOrderId, GET /api/v2_1/orders/ext/{extOrderId}; an id it does not
// hold is 404 DATA_NOT_FOUND.
type payuRetrieve struct {
	mu      sync.Mutex
	orders  map[string]payuOrder // by extOrderId
	created int                  // orders the creates made
	posts   []string             // each create's body
}

func (p *payuRetrieve) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Method == http.MethodPost {
		p.posts = append(p.posts, string(b))
		var o payuOrder
		if json.Unmarshal(b, &o) == nil && o.ExtOrderID != "" {
			if _, held := p.orders[o.ExtOrderID]; !held {
				p.created++
				o.OrderID, o.Status = "WZHF5FFDRJ140731GUEST000P01", "COMPLETED"
				p.orders[o.ExtOrderID] = o
			}
		}
		dropConnection(w)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	o, ok := p.orders[strings.TrimPrefix(r.URL.Path, "/api/v2_1/orders/ext/")]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"status":{"statusCode":"DATA_NOT_FOUND","statusDesc":"Could not find data for given criteria."}}`)
		return
	}
	body, _ := json.Marshal(map[string]any{"orders": []payuOrder{o}, "status": map[string]string{"statusCode": "SUCCESS"}})
	_, _ = w.Write(body)
}

// An extOrderId another order took first (a business id reused, two
// services on one POS) is refused to ours, the refusal lost; the retrieve
// by the id answers the other order, wrapped in PayU's "orders" list,
// whose amount and currency are not ours. "orders" was no envelope
// otherRequest looked in: the other order's COMPLETED settled ours
// succeeded with its orderId, and ours, never placed, was lost. It is
// another request's result: ReviewKeyInUse, nothing settled, nothing
// resent. Our own order, found the same way, settles.
func TestPayUOrderRetrieveFindingAnotherOrderIsNotOurs(t *testing.T) {
	const ours = `{"extOrderId":"k","merchantPosId":"145227","description":"RTV market","currencyCode":"PLN","totalAmount":"21000",` +
		`"payMethods":{"payMethod":{"type":"CARD_TOKEN","value":"TOKC_XATB7DF8ACXYTVQIPLWTVPFRKQE"}}}`
	for _, tt := range []struct {
		name   string
		held   *payuOrder // the order under the id before ours is sent
		theirs bool
		how    string // the attempt's error, when theirs
	}{
		{name: "another amount", held: &payuOrder{OrderID: "THEIRS1", ExtOrderID: "k", CurrencyCode: "PLN", TotalAmount: "10000", Status: "COMPLETED"}, theirs: true,
			how: `totalAmount "10000", not the request's totalAmount "21000"`},
		{name: "another currency", held: &payuOrder{OrderID: "THEIRS2", ExtOrderID: "k", CurrencyCode: "EUR", TotalAmount: "21000", Status: "COMPLETED"}, theirs: true,
			how: `currencyCode "EUR", not the request's currencyCode "PLN"`},
		{name: "ours"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &payuRetrieve{orders: map[string]payuOrder{}}
			if tt.held != nil {
				p.orders["k"] = *tt.held
			}
			srv := httptest.NewServer(http.HandlerFunc(p.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeListed("orders", "orderId", "COMPLETED", "CANCELED")),
				idem.WithResultEndpoint(srv.URL+"/api/v2_1/orders/ext/{key}"))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/api/v2_1/orders", Body: []byte(ours)})
			made := 0 // orders the create made: none when the id was another's
			if tt.theirs {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.NotErrorIs(t, err, idem.ErrFailed)
				require.Equal(t, idem.ReviewKeyInUse, res.Review)

				// Resume asks again and resends nothing.
				sum, err := c.Resume(t.Context())
				require.NoError(t, err)
				require.Equal(t, idem.Summary{Visited: 1, Review: 1}, sum)
				requireReviewedNotOurs(t, c, tt.how)
			} else {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "WZHF5FFDRJ140731GUEST000P01", res.ResourceID)
				made = 1
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			require.Equal(t, made, p.created)
			require.Equal(t, []string{ours}, p.posts, "one create, the journaled bytes")
		})
	}
}
