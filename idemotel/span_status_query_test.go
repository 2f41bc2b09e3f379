package idemotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A transport error's span status quoted the request URL with its query
// string, which the url.full attribute leaves out because idem cannot tell
// a secret in it: Google APIs take the API key as ?key=
// (cloud.google.com/docs/authentication/api-keys-use), a name too generic
// for the client to refuse. The connection here drops after the server
// committed the order, as a load balancer's idle timeout does.
func TestTransportErrorStatusLeavesOutTheQuery(t *testing.T) {
	f := newFakeAPI(t)
	c, srv, tel := f.client(t), f.srv, f.tel

	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "a"}))
	_, err := c.Submit(context.Background(), idem.Request{Key: "a", URL: srv.URL + "/orders?key=QUERY_SECRET", Body: []byte(`{}`)})
	require.NoError(t, err)

	posts := 0
	for _, r := range srv.Requests() {
		if r.Method != "GET" {
			posts++
		}
	}
	require.Equal(t, 1, posts, "the dropped order is confirmed by a query, not sent again")
	failed := 0
	for _, s := range tel.spans.Ended() {
		if s.Status().Code == codes.Error {
			failed++
		}
		require.NotContains(t, s.Status().Description, "QUERY_SECRET", "span %s", s.Name())
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				require.NotContains(t, kv.Value.Emit(), "QUERY_SECRET", "span %s event %s", s.Name(), ev.Name)
			}
		}
	}
	require.Equal(t, 1, failed, "the dropped attempt's span, and only it, is an error")
}
