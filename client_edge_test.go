package idem_test

// Edge cases of the client's newer entry points: building a Request from an
// *http.Request, credentials in a URL that does not parse, and per-host key
// windows.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// net/http: "For client requests, an empty string means GET." A request
// built by hand (&http.Request{URL: u}) is a GET; RequestFromHTTP kept the
// empty method, which Prepare turns into POST: the journaled intent is
// another request than the one the caller built.
func TestRequestFromHTTPEmptyMethodIsGET(t *testing.T) {
	u, err := url.Parse("https://api.example.com/v1/orders/o1")
	require.NoError(t, err)
	req, err := idem.RequestFromHTTP(&http.Request{URL: u, Header: http.Header{}})
	require.NoError(t, err)
	require.Equal(t, http.MethodGet, req.Method, "an empty http.Request.Method means GET")
}

// An Idempotency-Key header the caller set, but empty (a key computed from
// a field that was blank): RequestFromHTTP turned it into Request.Key "",
// which Prepare and Submit read as "make up a key". Each resubmission of
// the same request then got a fresh random key and was executed again: two
// charges for one intent, where the caller meant one key.
func TestRequestFromHTTPEmptyKeyHeaderRefused(t *testing.T) {
	e := newEnv(t)
	build := func() *http.Request {
		r, err := http.NewRequest(http.MethodPost, e.srv.URL+"/orders", strings.NewReader(`{"amount":5}`))
		require.NoError(t, err)
		r.Header.Set("Idempotency-Key", "")
		return r
	}
	req, err := idem.RequestFromHTTP(build())
	if err != nil {
		require.ErrorIs(t, err, idem.ErrInvalidRequest)
		return
	}
	// Accepted: then resubmitting the same request must not execute twice.
	_, err = e.client.Submit(e.ctx, req)
	require.NoError(t, err)
	again, err := idem.RequestFromHTTP(build())
	require.NoError(t, err)
	_, err = e.client.Submit(e.ctx, again)
	require.NoError(t, err)
	ops, err := e.client.List(e.ctx, idem.Filter{})
	require.NoError(t, err)
	require.Len(t, ops, 1, "one http.Request with an (empty) key header, submitted twice, became %d operations", len(ops))
}

// A URL that carries a password and fails to parse: the error Prepare and
// Submit return (which callers log) quoted the whole URL, password and all,
// since url.Parse's error holds the raw string.
func TestInvalidURLErrorDoesNotLeakPassword(t *testing.T) {
	const secret = "s3cret_PLANTED_PASSWORD"
	e := newEnv(t)
	for _, raw := range []string{
		"https://user:" + secret + "@api.example.com/%zz",   // bad escape in the path
		"https://user:" + secret + "@api example.com/x",     // bad host
		"https://user:" + secret + "@api.example.com:bad/x", // bad port
	} {
		req := idem.Request{Key: "k", URL: raw, Body: []byte(`{}`)}
		_, err := e.client.Prepare(e.ctx, req)
		require.Error(t, err)
		require.NotContainsf(t, err.Error(), secret, "Prepare(%q) error leaks the password", raw)
		_, err = e.client.Submit(e.ctx, req)
		require.Error(t, err)
		require.NotContainsf(t, err.Error(), secret, "Submit(%q) error leaks the password", raw)

		req = idem.Request{Key: "k", URL: e.srv.URL + "/orders", ResultURL: raw, Body: []byte(`{}`)}
		_, err = e.client.Prepare(e.ctx, req)
		require.Error(t, err)
		require.NotContainsf(t, err.Error(), secret, "Prepare with ResultURL %q: error leaks the password", raw)
	}
	ops, err := e.client.List(e.ctx, idem.Filter{AllScopes: true})
	require.NoError(t, err)
	require.Empty(t, ops, "nothing journaled")
}

// countingTransport answers every request 201 and counts them; it stands in
// for a server the test cannot listen as (api.example.test:80).
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"id":"r1"}`)), Request: r,
	}, nil
}

// WithHostKeyRetention names a host "as in the URL". A URL that spells the
// scheme's default port (https://host:443/, http://host:80/) is the same
// host, but the lookup compares u.Host verbatim, so the host's shorter
// window was ignored and the client-wide one (here Stripe's 24 h) applied:
// an operation that may have executed was resent an hour after its first
// send, to a server that forgets keys after 30 minutes. A duplicate charge.
func TestHostKeyRetentionDefaultPort(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"no port", "http://api.example.test/orders"},
		{"default port spelled out", "http://api.example.test:80/orders"},
		{"upper case and default port", "http://API.Example.Test:80/orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, noResultEndpoint())
			tr := &countingTransport{}
			c, err := idem.New(e.replica(), append(e.baseOpts(),
				idem.WithHTTPClient(&http.Client{Transport: tr}),
				idem.WithKeyRetention(idem.KeyRetentionStripe),
				idem.WithHostKeyRetention("api.example.test", idem.KeyRetentionFiber))...)
			require.NoError(t, err)
			_, err = c.Prepare(e.ctx, idem.Request{Key: "k", URL: tc.url, Body: []byte(`{"amount":1}`)})
			require.NoError(t, err)
			e.crashMidAttempt("k")     // may have executed
			e.clock.Advance(time.Hour) // past the host's 30 min, inside 24 h

			_, err = c.Resume(e.ctx)
			require.NoError(t, err)
			require.Zero(t, tr.n.Load(), "resent past the host's key window (30 min)")
			rec := e.record("k")
			require.Equal(t, idem.ReviewKeyExpired, rec.Review)
		})
	}
}

// keyFaultStore fails every Update of one key: a record the store cannot
// write (a custom Store's row that violates a constraint, a lease another
// replica holds), while every other record writes fine.
type keyFaultStore struct {
	idem.Store
	key string
	err error
}

func (s *keyFaultStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	if key == s.key {
		return nil, s.err
	}
	return s.Store.Update(ctx, scope, key, fn)
}

// Run's pass starts no further visit after the first journal error, and
// the failing operation is first in Due's order on every pass: one record
// that cannot be written kept every operation behind it from ever being
// visited, though the journal writes them fine.
func TestRunOneUnwritableRecordDoesNotStarveTheRest(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Prepare(e.ctx, e.req("a", `{"amount":1}`))
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	_, err = e.client.Prepare(e.ctx, e.req("b", `{"amount":2}`))
	require.NoError(t, err)
	e.clock.Advance(time.Hour) // both due, "a" first

	fs := &keyFaultStore{Store: e.store, key: "a", err: fmt.Errorf("row for key a: %w", journal.ErrInvalid)}
	c, err := idem.New(fs, append(e.baseOpts(), idem.WithResumeConcurrency(1))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(e.ctx)
	ran := runAsync(ctx, c)
	defer func() {
		cancel()
		<-ran
	}()
	waitHealth(t, c, ran, "Run failing passes", func(h idem.Health) bool { return h.ConsecutiveErrors >= 5 })
	rec := e.record("b")
	require.Equal(t, idem.StateSucceeded, rec.State,
		"operation b, which the journal writes fine, was never visited by %d passes", c.Health().ConsecutiveErrors)
	require.Len(t, e.submits("b"), 1)
	require.Empty(t, e.submits("a"), "a's attempt could not be journaled: never sent")
}
