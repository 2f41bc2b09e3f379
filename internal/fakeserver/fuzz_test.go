package fakeserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// FuzzServer sends arbitrary methods, paths, keys, scopes and bodies, twice
// each (so replays and conflicts are exercised), and checks that the server
// never panics and that every 4xx carries a JSON error.
func FuzzServer(f *testing.F) {
	f.Add("POST", "/orders", "k1", "Bearer a", []byte(`{"amount":1}`))
	f.Add("POST", "/orders", `"a\"b\\c"`, "", []byte{})
	f.Add("PUT", "/orders/1?x=%zz", `"unterminated`, "\x00", []byte{0xff, 0xfe})
	f.Add("GET", "/operations/k%2F1", "", "", []byte(nil))
	f.Add("GET", "/operations/%zz", "", "", []byte(nil))
	f.Add("POST", "/_faults", "", "", []byte(`{"kind":"drop-after-commit","count":3}`))
	f.Add("POST", "/_faults", "", "", []byte(`{"kind":"slow-processing","delay":"1h"}`))
	f.Add("POST", "/_faults", "", "", []byte(`{"kind":"delay-response","delay":"1h"}`))
	f.Add("POST", "/_reset", "", "", []byte(nil))
	f.Add("GET", "/_stats", "", "", []byte(nil))
	f.Add("BREW", "/", "k\r\n", "s", []byte("x"))
	f.Add("DELETE", "//..//operations/", strings.Repeat("k", 300), "", []byte("{"))

	f.Fuzz(func(t *testing.T, method, target, key, scope string, body []byte) {
		u, err := url.ParseRequestURI(target)
		if err != nil || method == "" {
			t.Skip()
		}
		clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		srv, err := fakeserver.New(fakeserver.Config{MaxBody: 64, MaxKeys: 1, Now: func() time.Time { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		// A submit first, so the fuzzed request may hit a stored key.
		serve(t, srv, "POST", &url.URL{Path: "/orders"}, "k1", "", nil)
		for range 2 {
			serve(t, srv, method, u, key, scope, body)
		}
		// Faults the fuzzer injected apply to these; they must not break
		// the server either.
		serve(t, srv, "POST", &url.URL{Path: "/orders"}, "k2", "", nil)
		serve(t, srv, "GET", &url.URL{Path: "/operations/k1"}, "", "", nil)
		_ = srv.Stats()
		_ = srv.Requests()
	})
}

func serve(t *testing.T, srv *fakeserver.Server, method string, u *url.URL, key, scope string, body []byte) {
	t.Helper()
	req := &http.Request{
		Method:     method,
		URL:        u,
		RequestURI: u.RequestURI(),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{},
		Body:   http.NoBody,
		Host:   "example.test",
	}
	if body != nil {
		req.Body = readCloser{strings.NewReader(string(body))}
		req.ContentLength = int64(len(body))
	}
	if key != "" {
		req.Header["Idempotency-Key"] = []string{key}
	}
	if scope != "" {
		req.Header["Authorization"] = []string{scope}
	}
	rec := httptest.NewRecorder()
	// A recorder cannot be hijacked: dropping the connection aborts the
	// handler with http.ErrAbortHandler, as net/http expects.
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			panic(p)
		}
	}()
	// A done context: a fuzzed delay fault ends at once.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	srv.ServeHTTP(rec, req.WithContext(ctx))
	if rec.Code >= 400 && rec.Code < 500 {
		var e struct {
			Error string `json:"error"`
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: status %d with Content-Type %q", method, u, rec.Code, ct)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s: status %d with body %q", method, u, rec.Code, rec.Body)
		}
	}
	if rec.Code >= 500 && !strings.Contains(rec.Body.String(), `"error"`) {
		t.Fatalf("%s %s: status %d with body %q", method, u, rec.Code, rec.Body)
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
