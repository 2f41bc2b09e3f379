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
