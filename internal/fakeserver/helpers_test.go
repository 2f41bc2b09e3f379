package fakeserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// fakeClock is a manual clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 3, 14, 15, 9, 26, 500_000_000, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// harness is a fake server behind a real loopback HTTP server.
type harness struct {
	srv   *fakeserver.Server
	ts    *httptest.Server
	clock *fakeClock
	// client opens a fresh connection per request, so net/http never
	// silently retries a request on a reused connection.
	client *http.Client
}

func newHarness(t testing.TB, cfg fakeserver.Config) *harness {
	t.Helper()
	clock := newFakeClock()
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	srv, err := fakeserver.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &harness{
		srv:    srv,
		ts:     ts,
		clock:  clock,
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// reply is a response read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

// errorMessage decodes a JSON error body.
func (r reply) errorMessage(t testing.TB) string {
	t.Helper()
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	var e struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &e), "body %q", r.body)
	require.NotEmpty(t, e.Error)
	return e.Error
}

// result decodes a result body.
func (r reply) result(t testing.TB) map[string]string {
	t.Helper()
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.body), &m), "body %q", r.body)
	return m
}

// call is one request to the harness.
type call struct {
	method string // default POST
	path   string // default /orders
	key    string // Idempotency-Key value; "" for none
	scope  string // Authorization value; "" for none
	body   string
	header http.Header // extra headers
}

func (h *harness) request(ctx context.Context, c call) (*http.Response, error) {
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.path == "" {
		c.path = "/orders"
	}
	req, err := http.NewRequestWithContext(ctx, c.method, h.ts.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		return nil, err
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	if c.scope != "" {
		req.Header.Set("Authorization", c.scope)
	}
	return h.client.Do(req)
}

// do sends c and reads the whole response; it fails the test on a
// transport error.
func (h *harness) do(t testing.TB, c call) reply {
	t.Helper()
	resp, err := h.request(context.Background(), c)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (h *harness) submit(t testing.TB, key, body string) reply {
	t.Helper()
	return h.do(t, call{key: key, body: body})
}

func (h *harness) query(t testing.TB, key string) reply {
	t.Helper()
	return h.do(t, call{method: http.MethodGet, path: "/operations/" + key})
}

// lastRequest returns the last logged request.
func (h *harness) lastRequest(t testing.TB) fakeserver.Request {
	t.Helper()
	reqs := h.srv.Requests()
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1]
}
