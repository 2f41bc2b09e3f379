package idem_test

import (
	"fmt"
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

// tenantServer is a platform API whose keys are scoped per connected
// account, chosen per request by a header (as Stripe-Account does): the
// same key in two accounts is two operations. The platform's own account
// (no header) already holds "order-1001". Submits' answers are lost (a
// gateway's 502 after the commit).
type tenantServer struct {
	*httptest.Server
	mu      sync.Mutex
	results map[string]string // account + " " + key → resource id
	queried []string          // the account each result query asked in
}

func (s *tenantServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	account := r.Header.Get("X-Account")
	s.mu.Lock()
	defer s.mu.Unlock()
	if key, ok := strings.CutPrefix(r.URL.Path, "/operations/"); ok {
		s.queried = append(s.queried, account)
		if id, ok := s.results[account+" "+key]; ok {
			_, _ = fmt.Fprintf(w, `{"state":"succeeded","resourceId":%q}`, id)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		return
	}
	k := account + " " + r.Header.Get("Idempotency-Key")
	if _, ok := s.results[k]; !ok {
		s.results[k] = "ord_of_" + account
	}
	w.WriteHeader(http.StatusBadGateway)
}

// Request.Header is "sent on every attempt", and a result query is one: a
// header that scopes the key must go with it, or the query reads the
// result another account holds for the same key and settles ours with it.
func TestResultQueryCarriesJournaledHeaders(t *testing.T) {
	srv := &tenantServer{results: map[string]string{" order-1001": "ord_of_platform"}}
	srv.Server = httptest.NewServer(http.HandlerFunc(srv.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv.Server, idemtest.NewClock(epoch), idem.WithResultEndpoint("/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: "order-1001", URL: srv.URL + "/orders",
		Header: http.Header{"X-Account": {"acct_acme"}}, Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	require.Equal(t, "ord_of_acct_acme", res.ResourceID, "settled with another account's result for the key")
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Equal(t, []string{"acct_acme"}, srv.queried)
}

// The journaled headers that make the submit conditional (If-None-Match:
// * for a create-only PUT) or describe its body are about the submit's
// target, not the result endpoint: on the query, a server answers a
// GET with If-None-Match: * for an existing record with 304, which
// settles nothing.
func TestResultQueryLeavesConditionalHeaders(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !strings.HasPrefix(r.URL.Path, "/operations/") {
			w.WriteHeader(http.StatusBadGateway) // committed, answer lost
			return
		}
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		if r.Header.Get("If-None-Match") == "*" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = io.WriteString(w, `{"state":"succeeded","resourceId":"doc_1"}`)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint("/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", Method: http.MethodPut, URL: srv.URL + "/docs/1",
		Header: http.Header{"If-None-Match": {"*"}, "X-Account": {"acct_acme"}, "Digest": {"sha-256=abc"}},
		Body:   []byte(`{"title":"t"}`)})
	require.NoError(t, err)
	require.Equal(t, "doc_1", res.ResourceID)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	require.Equal(t, "acct_acme", got[0].Get("X-Account"))
	for _, name := range []string{"If-None-Match", "Digest", "Content-Type"} {
		require.Emptyf(t, got[0].Values(name), "query carried %s", name)
	}
}
