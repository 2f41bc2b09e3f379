package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A result query refused 401 or 403 was journaled with its status and no
// words: the operator, seeing the operation stay unknown, never learned
// that the server said the key had expired or lacked a permission, the
// one thing to fix. Its words are kept, as a submit's refusal's are,
// with the credential the server quotes blanked. Stripe's 401 is
// {"error":{"type":"authentication_error","message":"Expired API Key
// provided: …"}} (docs.stripe.com/error-codes#api-key-expired), a
// restricted key's 403 an invalid_request_error that stripe-node raises
// as StripePermissionError ("The provided key 'rk_test_***…qs8Kgd' does
// not have the required permissions for this endpoint on account
// 'acct_…'", github.com/stripe/stripe-node/issues/2246). Stripe masks
// all but the key's last characters; the bodies here quote it whole,
// modelled on a server that does (the US EPA's "Key <key> not found",
// github.com/USEPA/ctxR/issues/32). The create's answers are lost.
func TestResultQueryRefusalKeepsTheServersWords(t *testing.T) {
	const secret = "rk_live_51HqLyjWDarjtT1zdp7dcXkq"
	for _, tt := range []struct {
		status int
		body   string
		words  string
	}{
		{http.StatusUnauthorized, `{"error":{"type":"authentication_error","message":"Expired API Key provided: ` + secret + `"}}`,
			"401: Expired API Key provided: "},
		{http.StatusForbidden, `{"error":{"type":"invalid_request_error","message":"The provided key '` + secret +
			`' does not have the required permissions for this endpoint on account 'acct_1HqLyj'."}}`,
			"403: The provided key '"},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			attempts, err := journaledQueries(t, tt.status, tt.body, idem.WithRequestHook(func(r *http.Request) error {
				r.Header.Set("Authorization", "Bearer "+secret)
				return nil
			}))
			require.NotContains(t, err.Error(), secret)
			for _, a := range attempts {
				require.NotContains(t, a.Err, secret, "attempt %d", a.Number)
				if a.Kind != journal.AttemptQuery {
					continue
				}
				require.Contains(t, a.Err, tt.words+"REDACTED", "attempt %d: the server's words, the key blanked", a.Number)
			}
		})
	}
}

// A gateway's 502 or 504, or Cloudflare's 52x for an origin it could not
// reach (524 "A timeout occurred",
// developers.cloudflare.com/support/troubleshooting/http-status-codes/cloudflare-5xx-errors/),
// is no refusal by the result endpoint but no answer from it: the
// journaled query said "result query refused", which sent the operator
// to the endpoint's permissions instead of its reachability.
func TestResultQueryGatewayAnswerIsNoAnswerFromTheEndpoint(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
	}{
		{http.StatusBadGateway, "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"},
		{http.StatusGatewayTimeout, ""},
		{524, "<!DOCTYPE html><html><head><title>api.example.com | 524: A timeout occurred</title></head></html>"},
	} {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			attempts, _ := journaledQueries(t, tt.status, tt.body)
			for _, a := range attempts {
				if a.Kind != journal.AttemptQuery {
					continue
				}
				require.Contains(t, a.Err, "no answer from the result endpoint", "attempt %d", a.Number)
				require.NotContains(t, a.Err, "refused", "attempt %d", a.Number)
			}
		})
	}
}

// journaledQueries submits key "k" to a server that answers its creates
// with a gateway's 502 and its result queries with status and body, and
// returns the journaled attempts and the submit's error, after checking
// that every request was journaled and every query with status.
func journaledQueries(t *testing.T, status int, body string, opts ...idem.Option) ([]journal.Attempt, error) {
	t.Helper()
	var mu sync.Mutex
	posts, gets := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			gets++
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
		posts++
		w.WriteHeader(http.StatusBadGateway) // a gateway's: committed or not, no one knows
	}))
	t.Cleanup(srv.Close)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, append([]idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithClock(idemtest.NewClock(epoch)),
		idem.WithResultEndpoint("/v1/orders/{key}")}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	_, serr := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, serr, idem.ErrUnknownOutcome)
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	queries := 0
	for _, a := range rec.Attempts {
		if a.Kind == journal.AttemptQuery {
			require.Equal(t, status, a.Status, "attempt %d", a.Number)
			queries++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, queries)
	require.Equal(t, gets, queries, "every query journaled")
	require.Equal(t, posts, len(rec.Attempts)-queries, "every submit journaled")
	return rec.Attempts, serr
}
