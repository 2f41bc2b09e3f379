package idemotel_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// roundTripFunc is an http.RoundTripper of a func.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An attempt's span status kept the URL's query string, which url.full
// leaves out (idem cannot tell a secret there: Google APIs' ?key=,
// cloud.google.com/docs/authentication/api-keys-use; OpenTelemetry's URL
// conventions let a system that cannot tell one leave the value out),
// wherever the error's text quotes the URL otherwise than as net/http's
// *url.Error does:
//   - hashicorp/go-retryablehttp's RoundTripper (its StandardClient, a
//     common WithHTTPClient) fails with "POST <URL> giving up after N
//     attempt(s): %w" (client.go, v0.7.8), the URL bare, which net/http
//     wraps in its own *url.Error;
//   - a request hook's own error naming the request it failed on, which
//     idem passes on with the journaled URL, query and all, in place of
//     the one the hook made.
//
// The connection drops after the server committed the order, as a load
// balancer's idle timeout does: one order, confirmed by a query.
func TestAttemptSpanStatusLeavesOutTheQueryHoweverQuoted(t *testing.T) {
	const secret = "QUERY_SECRET"
	t.Run("a Transport quoting the URL", func(t *testing.T) {
		testSpanStatusWithoutQuery(t, secret, 1, func(srv *idemtest.Server) []idem.Option {
			inner := srv.Client()
			return []idem.Option{idem.WithHTTPClient(&http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := inner.Do(r)
				if err != nil {
					return nil, fmt.Errorf("%s %s giving up after %d attempt(s): %w", r.Method, r.URL.Redacted(), 1, err)
				}
				return resp, nil
			})})}
		})
	})
	// A signer's or token refresh's error quoting the request it failed
	// on (modelled): the first attempt is never sent, the second is.
	t.Run("a request hook's error quoting the URL", func(t *testing.T) {
		var calls atomic.Int32
		testSpanStatusWithoutQuery(t, secret, 2, func(srv *idemtest.Server) []idem.Option {
			return []idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithRequestHook(func(r *http.Request) error {
				if calls.Add(1) == 1 {
					return fmt.Errorf("signing %s %s: token refresh timed out", r.Method, r.URL)
				}
				return nil
			})}
		})
	})
}

// testSpanStatusWithoutQuery submits order "a" to a URL whose query holds
// secret, with the fake dropping its connection after the commit, through
// the options opts makes, and checks the spans of the wantFailed failed
// attempts for it.
func testSpanStatusWithoutQuery(t *testing.T, secret string, wantFailed int, opts func(*idemtest.Server) []idem.Option) {
	f := newFakeAPI(t)
	srv, tel := f.srv, f.tel
	c, err := idem.New(f.store, append(opts(srv), idem.WithClock(f.clk),
		idem.WithResultEndpoint(srv.ResultTemplate()), idem.WithHooks(tel.inst.Hooks()))...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })

	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "a"}))
	_, err = c.Submit(context.Background(), idem.Request{Key: "a", URL: srv.URL + "/orders?key=" + secret, Body: []byte(`{}`)})
	require.NoError(t, err)

	posts := 0
	for _, r := range srv.Requests() {
		if r.Method != http.MethodGet {
			posts++
		}
	}
	require.Equal(t, 1, posts, "the dropped order is confirmed by a query, not sent again")
	failed := 0
	for _, s := range tel.spans.Ended() {
		if s.Status().Code != codes.Error {
			continue
		}
		failed++
		require.NotContains(t, s.Status().Description, secret, "span %s", s.Name())
		require.Contains(t, s.Status().Description, srv.URL+"/orders", "span %s names the URL as url.full does", s.Name())
	}
	require.Equal(t, wantFailed, failed, "the failed attempts' spans, and only they, are errors")
}
