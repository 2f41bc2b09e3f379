package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// payuRedirectURI is where PayU sends the buyer to pay an order it made.
const payuRedirectURI = "https://merch-prod.snd.payu.com/pay/?orderId=WZHF5FFDRJ140731GUEST000P01&token=eyJhbGciOiJIUzI1NiJ9"

// payuHostedOrders is PayU GPO's order create, POST /api/v2_1/orders,
// for an order the buyer pays on PayU's page: "The HTTP status code of the
// response is 302 and Location header is set to redirectUri"
// (https://developers.payu.com/en/restapi.html, Creating a new order),
// the order in the JSON body, "statusCode": "SUCCESS" with its orderId
// and the merchant's extOrderId; an extOrderId it holds is refused 400
// ERROR_ORDER_NOT_UNIQUE (order_not_unique_code_test.go). body, if set,
// replaces the 302's.
type payuHostedOrders struct {
	body string

	mu     sync.Mutex
	orders map[string]bool
	posts  int
}

func (p *payuHostedOrders) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	key := jsonMember("extOrderId")(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	if p.orders[key] {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"status":{"statusCode":"ERROR_ORDER_NOT_UNIQUE"}}`)
		return
	}
	if p.orders == nil {
		p.orders = map[string]bool{}
	}
	p.orders[key] = true
	body := p.body
	if body == "" {
		body = `{"status":{"statusCode":"SUCCESS"},"redirectUri":"` + payuRedirectURI + `","orderId":"WZHF5FFDRJ140731GUEST000P01","extOrderId":"` + key + `"}`
	}
	w.Header().Set("Location", payuRedirectURI)
	w.WriteHeader(http.StatusFound)
	_, _ = io.WriteString(w, body)
}

func (p *payuHostedOrders) sent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts
}

// PayU's 302 to an order create is its success, the order's id and the
// buyer's redirectUri in a body naming the extOrderId sent: the order is
// settled on it, sent once, its answer (the redirectUri the buyer goes
// to) returned. It was read as a redirect that settles nothing, resent,
// refused ERROR_ORDER_NOT_UNIQUE three times and left for a person: every
// hosted-payment order so, the made order never settled.
func TestPayUOrderCreateRedirectSettles(t *testing.T) {
	p := &payuHostedOrders{}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	c := heldKeyClient(t, srv, decodePayUOrder)
	res, err := c.Submit(t.Context(), payuTokenOrderRequest(srv.URL))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "WZHF5FFDRJ140731GUEST000P01", res.ResourceID)
	require.Equal(t, http.StatusFound, res.StatusCode)
	require.Contains(t, string(res.Body), payuRedirectURI, "the buyer's redirectUri")
	require.Empty(t, res.Review)
	require.Equal(t, 1, p.sent(), "sent once")
}

// A 302 whose body is no order of this key settles nothing, whatever the
// Decoder reads in it: one naming another extOrderId (a proxy's mix-up),
// one naming none, a failure (a redirect's body is no refusal), and an
// SSO proxy's login page. The operation stays open, never failed.
func TestRedirectBodyNotOursSettlesNothing(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"another extOrderId", `{"status":{"statusCode":"SUCCESS"},"orderId":"OTHER","extOrderId":"ord-41"}`},
		{"no extOrderId", `{"status":{"statusCode":"SUCCESS"},"orderId":"WZHF5FFDRJ140731GUEST000P01"}`},
		{"a failure naming the key", `{"status":{"statusCode":"ERROR_SYNTAX"},"extOrderId":"ord-42"}`},
		{"a login page", `<html><body><a href="https://sso.example.com/login">Found</a>.</body></html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &payuHostedOrders{body: tc.body}
			srv := httptest.NewServer(http.HandlerFunc(p.serve))
			t.Cleanup(srv.Close)
			c := heldKeyClient(t, srv, decodePayUOrder)
			res, err := c.Submit(t.Context(), payuTokenOrderRequest(srv.URL))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Empty(t, res.ResourceID)
		})
	}
}
