package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// refusingQueries answers every result query (a GET) itself with status,
// as the API's read side does when the credential cannot read orders:
// the submits go on to the server.
type refusingQueries struct {
	base   http.RoundTripper
	status int
}

func (q refusingQueries) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		return q.base.RoundTrip(r)
	}
	body := fmt.Sprintf(`{"error":{"type":"permission_error","code":%d}}`, q.status)
	return &http.Response{StatusCode: q.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// A result endpoint that answers but will not tell: 401 once the read
// credential has expired (RFC 9110 15.5.2), 403 for a key without read
// permission (Stripe's restricted keys: permission_error), 500 while the
// read side fails. The orders endpoint works and replays a key's stored
// result. Every visit of Run queried first and, the query failed, handed
// the operation back to its schedule: never resent, it was flagged "key
// expired" for a person once its window passed, though one resend inside
// it settles it. Default settings but the clock.
func TestRunResendsWhenTheResultEndpointRefuses(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newServer(t, idemtest.WithClock(clock.Now))
			settled := make(chan *idem.Result, 1)
			open, closeAll := restarts(t, idem.WithHTTPClient(&http.Client{Transport: refusingQueries{srv.Client().Transport, status}}),
				idem.WithClock(clock), idem.WithResultEndpoint(srv.URL+"/operations/{key}"),
				idem.WithSettleFunc(func(r *idem.Result) { settled <- r }))
			store, c := open()
			defer closeAll(store, c)

			// The caller's three submits executed once; every answer was lost.
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k", Count: 3}))
			_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			sent := clock.Now()

			ran := runAsync(t.Context(), c)
			res := within(t, settled, "Run settling the operation")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Empty(t, res.Review)
			require.Less(t, clock.Now().Sub(sent), idem.DefaultKeyRetention, "settled inside the key window")
			require.NoError(t, c.Close())
			require.ErrorIs(t, within(t, ran, "Run after Close"), idem.ErrClosed)
			var submits int
			for _, r := range srv.Requests() {
				if r.Method != http.MethodGet {
					submits++
					require.Equal(t, "k", r.Key)
				}
			}
			require.Equal(t, 4, submits, "the caller's three and Run's one")
			require.Equal(t, 1, srv.Effects("", "k"), "orders")
		})
	}
}
