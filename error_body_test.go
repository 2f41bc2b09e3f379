package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A JSON-RPC 2.0 API answers every call 200 OK, errors included, and every
// answer carries the call's "id": {"jsonrpc":"2.0","id":"1","error":{…}}.
// An "id" beside an "error", or in any JSON-RPC answer, is not a created
// resource: the payment that failed must never be reported succeeded.
func TestSuccessStatusWithErrorBodyIsNotSucceeded(t *testing.T) {
	for name, body := range map[string]string{
		"json-rpc error":     `{"jsonrpc":"2.0","id":"1","error":{"code":-32000,"message":"insufficient funds"}}`,
		"error string":       `{"id":"req_1","error":"card declined"}`,
		"errors list":        `{"id":"req_1","errors":[{"message":"card declined"}]}`,
		"state and an error": `{"state":"succeeded","resourceId":"ord_1","error":"card declined"}`,
		// A JSON-RPC success is no resource either: its "id" is the call's,
		// and what happened is in "result", which DecodeJSON does not read.
		"json-rpc result declined": `{"jsonrpc":"2.0","id":"1","result":{"status":"declined","payment":"pay_1"}}`,
		"json-rpc result":          `{"jsonrpc":"2.0","id":"pay-call-7","result":{"id":"pay_1"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			posts := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				posts++
				mu.Unlock()
				_, _ = io.WriteString(w, body)
			}))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/rpc",
				Body: []byte(`{"jsonrpc":"2.0","id":"1","method":"pay","params":{"amount":100}}`)})
			require.NotEqual(t, idem.StateSucceeded, res.State, "an answer that proves nothing was taken for a success (resource %q)", res.ResourceID)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		})
	}
	t.Run("empty error members are no error", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, `{"id":"ord_1","error":null,"errors":[]}`)
		}))
		t.Cleanup(srv.Close)
		c := clientFor(t, srv, idemtest.NewClock(epoch))
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{}`)})
		require.NoError(t, err)
		require.Equal(t, "ord_1", res.ResourceID)
	})
}
