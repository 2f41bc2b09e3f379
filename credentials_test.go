package idem_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// Credentials: "added at send time ... and are never written to disk". A
// request hook that puts the API key in the query string (as some APIs
// want) had it written to the journal and the log: net/http's *url.Error
// text carries the full URL, and idem stored and logged that text. So did
// the error of a Transport that quotes the URL itself:
// hashicorp/go-retryablehttp's RoundTripper (its StandardClient, a common
// http.Client for WithHTTPClient) fails with "POST <URL> giving up after
// N attempt(s): <net/http's error, quoting it again>", which net/http
// wraps in its *url.Error.
func TestHookCredentialInURLNotJournaledOrLogged(t *testing.T) {
	t.Run("net/http's error", func(t *testing.T) { testHookCredentialInURL(t, script(step{err: dialRefused}), "", "&", "api_key") })
	// canonical: the Transport signs the request first, writing its query
	// in canonical (sorted) order, as AWS SigV4 signers do: the URL its
	// error quotes is in no form of the one idem sent.
	quoting := func(canonical bool) envOption {
		inner := &http.Client{Transport: &scriptTransport{base: http.DefaultTransport, script: []step{{err: dialRefused}}}}
		return clientOpts(idem.WithHTTPClient(&http.Client{Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			if canonical {
				r = r.Clone(r.Context())
				r.URL.RawQuery = r.URL.Query().Encode()
			}
			resp, err := inner.Do(r)
			if err != nil {
				return nil, fmt.Errorf("%s %s giving up after %d attempt(s): %w", r.Method, r.URL.Redacted(), 1, err)
			}
			return resp, nil
		})}))
	}
	t.Run("a Transport's error quoting the URL", func(t *testing.T) { testHookCredentialInURL(t, quoting(false), "", "&", "api_key") })
	// net/http's *url.Error quotes the URL with %q: a '"' or '\' in the
	// query is escaped there, and the URL as sent was not found in it. A
	// search filter's quotes (Stripe's query=metadata["order_id"]:"6735")
	// or a path-like value are such. Google APIs' key= is no name idem
	// knows a credential by: only the URL's replacement keeps it out.
	t.Run("a Transport's error quoting a URL with a quote in its query", func(t *testing.T) {
		testHookCredentialInURL(t, quoting(false), `?filter="vip"`, "&", "key")
	})
	t.Run("a Transport's error quoting a URL with a backslash in its query", func(t *testing.T) {
		testHookCredentialInURL(t, quoting(false), `?path=a\b`, "&", "key")
	})
	t.Run("a signing Transport's error quoting the URL it rewrote", func(t *testing.T) {
		testHookCredentialInURL(t, quoting(true), `?zone=eu`, "&", "api_key")
	})
}

// testHookCredentialInURL submits to the orders URL with query appended,
// through a hook that adds the API key to the query string as param: with
// q.Set (which encodes the query anew) when query is empty, else appended
// to it as written after sep ('&', or ';' for a server that reads it as
// one), as a hook that keeps the caller's query does.
func testHookCredentialInURL(t *testing.T, transport envOption, query, sep, param string) {
	const secret = "sk_live_QUERY_SECRET"
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var events []idem.AttemptEvent
	e := newEnv(t, transport, clientOpts(
		idem.WithLogger(logger),
		idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) { events = append(events, ev) }}),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", scope)
			if query != "" {
				r.URL.RawQuery += sep + param + "=" + secret
				return nil
			}
			q := r.URL.Query()
			q.Set(param, secret)
			r.URL.RawQuery = q.Encode()
			return nil
		})))
	req := e.req("k", `{}`)
	req.URL += query
	res, err := e.client.Submit(e.ctx, req)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	rec := e.record("k")
	for _, a := range rec.Attempts {
		require.NotContains(t, a.Err, secret, "a credential was journaled")
	}
	requireNotInJournalFile(t, e, secret)
	mu.Lock()
	require.NotContains(t, logs.String(), secret, "a credential was logged")
	mu.Unlock()
	require.NotEmpty(t, events)
	require.Error(t, events[0].Err)
	require.NotContains(t, events[0].Err.Error(), secret)
}

// requireNotInJournalFile closes e's client and journal, and checks that
// no byte of the journal file spells secret.
func requireNotInJournalFile(t *testing.T, e *env, secret string) {
	t.Helper()
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())
	raw, err := os.ReadFile(e.path)
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(secret)), "a credential is in the journal file")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// An API's own credential headers were journaled: only the standard names
// (Authorization, Cookie, X-Api-Key, …) were refused, so KuCoin's
// KC-API-PASSPHRASE or Binance's X-MBX-APIKEY set on a Request went to
// disk with the body, and stayed there past the key's rotation. Names that
// end as credentials' names do are refused as the standard ones are; a
// name that merely contains one (KC-API-KEY-VERSION) is none.
func TestCredentialNamedHeadersNeverJournaled(t *testing.T) {
	e := newEnv(t)
	for _, h := range []string{
		"KC-API-KEY", "KC-API-PASSPHRASE", "OK-ACCESS-PASSPHRASE", "X-MBX-APIKEY",
		"PLAID-SECRET", "X-Shopify-Access-Token", "X-Amz-Security-Token",
		"Ocp-Apim-Subscription-Key", "X-Auth-Key", "Set-Cookie",
		// Alpaca's order API takes its key pair as APCA-API-KEY-ID and
		// APCA-API-SECRET-KEY, no signature (docs.alpaca.markets/reference,
		// Authentication); Kushki's charges take the merchant's private
		// credential alone as Private-Merchant-Id (POST /card/v1/charges).
		"APCA-API-KEY-ID", "APCA-API-SECRET-KEY", "Private-Merchant-Id",
	} {
		r := e.req("k-"+h, `{}`)
		r.Header = http.Header{h: {"credential-value"}}
		_, err := e.client.Prepare(e.ctx, r)
		require.ErrorIs(t, err, idem.ErrSecretHeader, h)
		require.ErrorContains(t, err, "WithRequestHook", h)
		require.NotContains(t, err.Error(), "credential-value", h)

		hr, err := http.NewRequest(http.MethodPost, e.srv.URL+"/orders", nil)
		require.NoError(t, err)
		hr.Header.Set(h, "credential-value")
		_, err = idem.RequestFromHTTP(hr)
		require.ErrorIs(t, err, idem.ErrSecretHeader, h)
	}
	r := e.req("k-version", `{}`)
	r.Header = http.Header{"Kc-Api-Key-Version": {"2"}, "Stripe-Account": {"acct_1"}}
	_, err := e.client.Submit(e.ctx, r)
	require.NoError(t, err)
	h := e.record("k-version").Header
	require.Equal(t, []string{"2"}, h["Kc-Api-Key-Version"])
	require.Equal(t, []string{"acct_1"}, h["Stripe-Account"])
	require.Equal(t, 1, e.srv.Effects(scope, "k-version"))
	for _, h := range []string{"KC-API-KEY", "X-MBX-APIKEY"} {
		_, err := e.store.Get(e.ctx, idem.DefaultScope, "k-"+h)
		require.ErrorIs(t, err, journal.ErrNotFound, "a refused request is not journaled")
	}
}

// An idempotency key's header is no credential, however it ends (Twilio's
// I-Twilio-Idempotency-Token): refused as a credential, with the advice
// to add it in a request hook, a caller would make the key afresh on
// every resend. In Header it is the key's header, which idem sets from
// Request.Key, and the error says so, for a name without "idempotency"
// in it too (AWS's X-Amzn-Client-Token, docs.aws.amazon.com/
// billingconductor/latest/APIReference/API_CreateCustomLineItem.html);
// RequestFromHTTP keeps it as a header.
func TestIdempotencyKeyHeaderIsNoCredential(t *testing.T) {
	for _, name := range []string{"I-Twilio-Idempotency-Token", "X-Amzn-Client-Token"} {
		e := newEnv(t, clientOpts(idem.WithKeyHeader(name, idem.KeyBare)))
		r := e.req("k-twilio", `{}`)
		r.Header = http.Header{name: {"k-twilio"}}
		_, err := e.client.Prepare(e.ctx, r)
		require.ErrorIs(t, err, idem.ErrInvalidRequest, "%s: the key's header, set from Request.Key", name)
		require.NotErrorIs(t, err, idem.ErrSecretHeader, name)
		require.ErrorContains(t, err, "idem sets from Request.Key; remove it from Header", name)
	}
	e := newEnv(t, clientOpts(idem.WithKeyHeader("I-Twilio-Idempotency-Token", idem.KeyBare)))

	hr, err := http.NewRequest(http.MethodPost, e.srv.URL+"/orders", nil)
	require.NoError(t, err)
	hr.Header.Set("I-Twilio-Idempotency-Token", "k-twilio")
	_, err = idem.RequestFromHTTP(hr)
	require.NotErrorIs(t, err, idem.ErrSecretHeader, "RequestFromHTTP")
}

// A request hook that fails after it added the credentials, and says
// what it was doing with the request it holds (an OAuth token refresh's
// error, a signer's "signing <URL>: clock skew"): its error was journaled
// as the attempt's and logged, the credentials in it. The hook's error
// reaches the journal with the URL as journaled and the credentials it
// added blanked.
func TestFailingHookErrorKeepsNoCredential(t *testing.T) {
	const token, apiKey = "tok_live_HOOK_BEARER_SECRET", "sk_live_HOOK_QUERY_SECRET"
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var calls int
	e := newEnv(t, clientOpts(
		idem.WithLogger(logger),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			q := r.URL.Query()
			q.Set("api_key", apiKey)
			r.URL.RawQuery = q.Encode()
			if calls++; calls == 1 {
				return fmt.Errorf("signing %s with %q: clock skew too large", r.URL, r.Header.Get("Authorization"))
			}
			return nil
		})))
	requireHookErrorKeptWithout(t, e, &logs, "clock skew", token, apiKey)
}

// requireHookErrorKeptWithout submits through e, whose request hook fails
// once with an error that says words, and asserts that the operation
// succeeded, its first attempt's journaled error says words, and none of
// secrets is in any attempt's error, the journal file or logs.
func requireHookErrorKeptWithout(t *testing.T, e *env, logs *syncBuffer, words string, secrets ...string) {
	t.Helper()
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	rec := e.record("k")
	require.Contains(t, rec.Attempts[0].Err, words, "the hook's error, journaled")
	for _, secret := range secrets {
		for _, a := range rec.Attempts {
			require.NotContains(t, a.Err, secret, "a credential was journaled")
		}
		require.NotContains(t, logs.String(), secret, "a credential was logged")
	}
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())
	raw, err := os.ReadFile(e.path)
	require.NoError(t, err)
	for _, secret := range secrets {
		require.False(t, bytes.Contains(raw, []byte(secret)), "a credential is in the journal file")
	}
}

// A hook that sends its API key by Basic authentication, as Stripe takes
// it (the key as the username, no password:
// docs.stripe.com/api/authentication) and Razorpay takes its key id and
// secret (razorpay.com/docs/api/authentication), holds the key in the
// Authorization header only base64-encoded, and a failing hook's error
// quotes it as the hook knows it: decoded. That form was journaled and
// logged as it came.
func TestFailingHookErrorKeepsNoBasicCredential(t *testing.T) {
	for _, tt := range []struct{ name, user, pass string }{
		{"key as the username", "sk_live_HOOK_BASIC_SECRET", ""},
		{"key id and secret", "rzp_live_HOOKKEYID", "HOOK_BASIC_PASSWORD_SECRET"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			secret := tt.user
			if tt.pass != "" {
				secret = tt.pass
			}
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var calls int
			e := newEnv(t, clientOpts(
				idem.WithLogger(logger),
				idem.WithRequestHook(func(r *http.Request) error {
					r.SetBasicAuth(tt.user, tt.pass)
					if calls++; calls == 1 {
						return fmt.Errorf("credentials %s:%s: key rotated, retry after reload", tt.user, tt.pass)
					}
					return nil
				})))
			requireHookErrorKeptWithout(t, e, &logs, "key rotated", secret)
		})
	}
}
