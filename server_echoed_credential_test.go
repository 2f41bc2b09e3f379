package idem_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A server that quotes a credential back in its refusal had it journaled
// (the failure's reason and body, the attempt's error) and logged, though
// it was added by the request hook at send time and never given to
// idem to keep: idem recorded the server's words as they came. It knows
// the values the hook added to that attempt, and blanks them in what it
// records of the answer, the words around them kept.
func TestServerEchoOfHookCredentialNotJournaledOrLogged(t *testing.T) {
	for _, tt := range []struct {
		name string
		// hook adds the credential to the request; answer is the
		// server's refusal of it, quoting what the request carried.
		hook   func(r *http.Request)
		answer func(r *http.Request) (int, string)
		secret string // what must never be recorded
		words  string // what a person must still read
	}{{
		// The US EPA's CTX APIs take the key as x-api-key and answer an
		// unknown one with a detail naming it whole: "Please contact API
		// admin for requesting a valid API key. Key xxxxxxxxxx not
		// found." (github.com/USEPA/ctxR/issues/32).
		name:   "an unknown key named in the detail",
		hook:   func(r *http.Request) { r.Header.Set("X-Api-Key", "a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d") },
		secret: "a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
		answer: func(r *http.Request) (int, string) {
			return http.StatusUnauthorized, fmt.Sprintf(`{"title":"API Key Not Found","detail":"Please contact API admin for requesting a valid API key. Key %s not found."}`, r.Header.Get("X-Api-Key"))
		},
		words: "not found",
	}, {
		// Stripe takes its secret key as the Basic username
		// (docs.stripe.com/api/authentication) and names a refused one
		// in its message, masked but for its last four characters: a
		// key that short is shown whole ("Invalid API Key provided:
		// nil", github.com/coreymgilmore/stripe-appengine-frontend/
		// issues/2). A username under eight bytes was never blanked.
		name:   "a short Basic username quoted whole",
		hook:   func(r *http.Request) { r.SetBasicAuth("sk_x", "") },
		secret: "sk_x",
		answer: func(r *http.Request) (int, string) {
			user, _, _ := r.BasicAuth()
			return http.StatusUnauthorized, fmt.Sprintf(`{"error":{"message":"Invalid API Key provided: %s","type":"invalid_request_error"}}`, user)
		},
		words: "Invalid API Key provided",
	}, {
		// A debugging 400 that shows the request's Authorization header,
		// as an API gateway's echo of a malformed one does.
		name:   "the Authorization header echoed",
		hook:   func(r *http.Request) { r.Header.Set("Authorization", "Bearer tok_ECHOED_BEARER_SECRET") },
		secret: "tok_ECHOED_BEARER_SECRET",
		answer: func(r *http.Request) (int, string) {
			return http.StatusBadRequest, fmt.Sprintf(`{"message":"malformed Authorization header '%s'"}`, r.Header.Get("Authorization"))
		},
		words: "malformed Authorization header",
	}, {
		// The same echo from a PHP server: json_encode writes '/' as
		// "\/" unless told JSON_UNESCAPED_SLASHES
		// (php.net/manual/en/json.constants.php; php-src's
		// ext/json/tests/json_encode_unescaped_slashes.phpt:
		// json_encode('a/b') is "a\/b"), and an opaque base64 token
		// holds a '/' one time in two. What follows the '/' is kept
		// from the record.
		name:   "the Authorization header echoed by PHP's json_encode",
		hook:   func(r *http.Request) { r.Header.Set("Authorization", "Bearer 8Gk2/xQ9vLm3Zp7Rt4Wq1Ys6Hn0Jc5Bf") },
		secret: "xQ9vLm3Zp7Rt4Wq1Ys6Hn0Jc5Bf",
		answer: func(r *http.Request) (int, string) {
			return http.StatusBadRequest, fmt.Sprintf(`{"message":"malformed Authorization header '%s'"}`, strings.ReplaceAll(r.Header.Get("Authorization"), "/", `\/`))
		},
		words: "malformed Authorization header",
	}, {
		// A key sent in the query string, past a ';' that the server does
		// not read as '&': the value it reads and quotes runs past it.
		name: "a query key read past a semicolon",
		hook: func(r *http.Request) { r.URL.RawQuery = "api_key=sk_live_QRY;rest_OF_THE_KEY" },
		answer: func(r *http.Request) (int, string) {
			return http.StatusUnauthorized, fmt.Sprintf(`{"message":"invalid api_key value %s"}`, strings.TrimPrefix(r.URL.RawQuery, "api_key="))
		},
		secret: "rest_OF_THE_KEY",
		words:  "invalid api_key value",
	}, {
		// Telegram's Bot API takes its token in the path
		// (https://api.telegram.org/bot<token>/METHOD_NAME,
		// core.telegram.org/bots/api#making-requests): a hook that puts
		// it there adds a segment the journaled URL does not have, and a
		// server's echo of the path (a debugging 400's, not Telegram's,
		// whose description names no path) quotes it.
		name:   "a token the hook put in the path",
		hook:   func(r *http.Request) { r.URL.Path = "/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw" + r.URL.Path },
		secret: "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
		answer: func(r *http.Request) (int, string) {
			return http.StatusBadRequest, fmt.Sprintf(`{"error":"no method at %s"}`, r.URL.Path)
		},
		words: "no method at",
	}, {
		// Google APIs take the API key as ?key=
		// (cloud.google.com/docs/authentication/api-keys-use), a name
		// too generic for idem to refuse in a Request's URL: README's
		// advice is to add such a parameter in the request hook. A
		// server's echo of the query (a debugging 400's, modelled)
		// quoted it, and only SecretParam's names were blanked.
		name:   "a key the hook put in the query under a name of its own",
		hook:   func(r *http.Request) { r.URL.RawQuery = "key=AIzaSyFAKE0123456789abcdefghijklmnopqrs" },
		secret: "AIzaSyFAKE0123456789abcdefghijklmnopqrs",
		answer: func(r *http.Request) (int, string) {
			return http.StatusBadRequest, fmt.Sprintf(`{"error":"unknown field in %s"}`, r.URL.RequestURI())
		},
		words: "unknown field in /v1/orders",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []string // the credential as each request carried it
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				status, body := tt.answer(r)
				mu.Lock()
				sent = append(sent, body)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(srv.Close)
			rc := newRecordingClient(t, srv, idem.WithRequestHook(func(r *http.Request) error { tt.hook(r); return nil }))
			res, err := rc.client.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/orders", Body: []byte(`{"amount":100}`)})
			require.ErrorIs(t, err, idem.ErrFailed, "a refusal of the credential: nothing executed")
			require.NotContains(t, err.Error(), tt.secret, "the call's error")
			mu.Lock()
			require.Len(t, sent, 1, "one request, refused")
			require.Contains(t, sent[0], tt.secret, "the server quoted the credential it was sent")
			mu.Unlock()

			require.Contains(t, res.Reason, tt.words, "the server's words, for a person")
			require.NotContains(t, res.Reason, tt.secret)
			require.NotContains(t, string(res.Body), tt.secret)
			rc.requireNothingHolds(t, "k", tt.secret)
		})
	}
}

// recordingClient is a Client with the default settings and opts, on its
// own journal, whose log lines and attempt events are kept.
type recordingClient struct {
	client *idem.Client
	store  *journal.Store
	path   string
	logs   syncBuffer
	mu     sync.Mutex
	events []idem.AttemptEvent
}

func newRecordingClient(t *testing.T, srv *httptest.Server, opts ...idem.Option) *recordingClient {
	t.Helper()
	rc := &recordingClient{path: filepath.Join(t.TempDir(), "idem.journal")}
	store, err := journal.Open(rc.path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, append([]idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithClock(idemtest.NewClock(epoch)),
		idem.WithLogger(slog.New(slog.NewTextHandler(&rc.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.events = append(rc.events, ev)
		}}),
	}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	rc.client, rc.store = c, store
	return rc
}

// requireNothingHolds asserts that nothing recorded of operation key
// (its journaled result and attempts, the attempt events, the log, the
// journal's files) holds secret, and closes the client and its journal.
func (rc *recordingClient) requireNothingHolds(t *testing.T, key, secret string) {
	t.Helper()
	rec, err := rc.store.Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	if rec.Result != nil {
		require.NotContains(t, rec.Result.Reason, secret, "journaled reason")
		require.NotContains(t, string(rec.Result.Body), secret, "journaled body")
	}
	for _, a := range rec.Attempts {
		require.NotContains(t, a.Err, secret, "journaled attempt error")
	}
	rc.mu.Lock()
	require.NotEmpty(t, rc.events)
	for _, ev := range rc.events {
		if ev.Err != nil {
			require.NotContains(t, ev.Err.Error(), secret, "AttemptEvent.Err")
		}
	}
	rc.mu.Unlock()
	require.NotContains(t, rc.logs.String(), secret, "a credential was logged")
	require.NoError(t, rc.client.Close())
	require.NoError(t, rc.store.Close())
	requireJournalFilesWithout(t, rc.path, secret)
}

// requireJournalFilesWithout asserts that no file of the journal at path
// (the bbolt file, its log segments, any marker beside it) spells secret,
// and that each is its owner's alone (0600).
func requireJournalFilesWithout(t *testing.T, path, secret string) {
	t.Helper()
	dir, base := filepath.Dir(path), filepath.Base(path)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	seen := 0
	for _, ent := range entries {
		if !strings.HasPrefix(ent.Name(), base) {
			continue
		}
		seen++
		fi, err := ent.Info()
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "mode of %s", ent.Name())
		raw, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		require.NoError(t, err)
		require.False(t, bytes.Contains(raw, []byte(secret)), "a credential is in %s", ent.Name())
	}
	require.NotZero(t, seen, "the journal's files")
}
