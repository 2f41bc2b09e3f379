package idem_test

import (
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

// An order API that creates the order at the id its client chose, PUT
// /v1/orders/{id} (modelled; Google AIP-133's client-assigned ids), and
// reads it back at the same path: an IOC order fills 5 of 10 and the rest
// is canceled, so the order reads "canceled" though it executed. The
// create's answer is lost. The order's "id" is the key, as a status
// monitor's is; read as the key's operation canceled, the order that
// filled settled failed and its caller, told nothing was done, ordered
// again: a second fill. It is the resource the request made, in a state
// reached after: succeeded, one order.
func TestOrderAtClientChosenIDCanceledAfterFillIsNotFailed(t *testing.T) {
	const key = "ord-7f3a9c"
	var mu sync.Mutex
	orders := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/orders/")
		mu.Lock()
		n := orders[id]
		if r.Method == http.MethodPut && n == 0 {
			orders[id] = 1
		}
		mu.Unlock()
		switch {
		case r.Method == http.MethodPut && n == 0:
			// Executed, its answer lost.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
		case n == 0:
			w.WriteHeader(http.StatusNotFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"`+id+`","status":"canceled","qty":"10","filled_qty":"5","time_in_force":"ioc"}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint("/v1/orders/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: key, Method: http.MethodPut, URL: srv.URL + "/v1/orders/" + key,
		Body: []byte(`{"symbol":"ACME","qty":"10","time_in_force":"ioc"}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, key, res.ResourceID)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{key: 1}, orders, "orders placed")
}

// The request names the key as its resource's "id" in its path or in its
// body: the same resource made, canceled after. Unless the answer holds
// nothing but a status monitor's members: a PUT /widgets/{key} whose
// client passed the key as its Operation-Id too (modelled), polled at the
// key's monitor, whose "Canceled" says the widget was never made.
func TestDecodeJSONCanceledResourceTheRequestNamed(t *testing.T) {
	const order = `{"id":"k","status":"Canceled","qty":"10","filled_qty":"5"}`
	const monitor = `{"id":"k","status":"Canceled","createdDateTime":"2026-11-29T12:00:00Z","lastActionDateTime":"2026-11-29T12:01:00Z"}`
	for _, tc := range []struct {
		url, body, answer string
		want              idem.State
	}{
		{"https://api.example/v1/orders/k", `{"qty":"10"}`, order, idem.StateSucceeded},
		{"https://api.example/v1/orders", `{"id":"k","qty":"10"}`, order, idem.StateSucceeded},
		{"https://api.example/v1/orders", `{"id":"other","qty":"10"}`, order, idem.StateFailed},
		{"https://api.example/documents:analyze", `{"source":"doc-1"}`, monitor, idem.StateFailed},
		{"https://api.example/widgets/k", `{"size":"large"}`, monitor, idem.StateFailed},
	} {
		out, err := idem.DecodeJSON(&idem.Answer{Key: "k", Method: http.MethodPut, URL: tc.url, RequestBody: []byte(tc.body),
			StatusCode: http.StatusOK, Body: []byte(tc.answer), Query: true})
		require.NoError(t, err, tc.body)
		require.Equal(t, tc.want, out.State, "%s %s: %s", tc.url, tc.body, tc.answer)
	}
}
