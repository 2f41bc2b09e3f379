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

// graphQLResults is a result endpoint in front of a GraphQL API, as the
// README has a GraphQL API given one (idem asks with a GET): it runs the
// API's query for the key's refund and passes the API's answer through,
// 200 OK whatever it says, the mutation's own shape when the refund is
// found. internal answers the next that many queries with the API's
// internal error (Shopify's INTERNAL_SERVER_ERROR, answered to queries
// as to mutations; Apollo Server's code for a resolver's failure).
type graphQLResults struct {
	m *idempotentMutations

	mu       sync.Mutex
	internal int
	queries  int
}

func (g *graphQLResults) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		g.m.serve(w, r)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, "/refunds/")
	g.mu.Lock()
	g.queries++
	internal := g.internal > 0
	if internal {
		g.internal--
	}
	g.mu.Unlock()
	g.m.mu.Lock()
	result := g.m.results[key]
	g.m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case internal:
		_, _ = io.WriteString(w, shopifyInternal)
	case result != "":
		_, _ = io.WriteString(w, result)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// A result query answered with a GraphQL internal error proves nothing,
// as a submit's does (TestGraphQLInternalErrorIsNoFailure): the API's
// query failed, not the refund, which the lost answer may have made. A
// decoder that takes any top-level error for a failure, given for the
// submit's answers and so reading the query's too, settled it ErrFailed
// for a refund that was made, inviting a second. One refund: the next
// query finds it.
func TestGraphQLResultInternalErrorIsNoFailure(t *testing.T) {
	m := &idempotentMutations{faults: []string{"lost"}, runs: map[string]int{}, results: map[string]string{}}
	g := &graphQLResults{m: m, internal: 1}
	srv := httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeErrorsFail),
		idem.WithResultEndpoint("/refunds/{key}"))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/admin/api/2026-01/graphql.json",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: refundDocument("k")})
	requireOutcome(t, res, err, idem.StateSucceeded, nil, "gid://shopify/Refund/1", "")
	m.requireOneRefund(t, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, 2, g.queries, "queries")
}
