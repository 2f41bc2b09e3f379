package idem_test

import (
	"compress/gzip"
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

// brotliCDN models a CDN in front of an order API: it compresses JSON
// with the best coding the request offers, Brotli before gzip, as
// Cloudflare does
// (https://developers.cloudflare.com/speed/optimization/content/compression/).
// The first submit of a key gets a 504 after the order was made.
type brotliCDN struct {
	srv       *httptest.Server
	mu        sync.Mutex
	orders    int
	posts     int
	queries   int
	offered   []string // each request's Accept-Encoding
	firstLost bool
}

func newBrotliCDN(t testing.TB, firstLost bool) *brotliCDN {
	t.Helper()
	b := &brotliCDN{firstLost: firstLost}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *brotliCDN) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	b.mu.Lock()
	ae := r.Header.Get("Accept-Encoding")
	b.offered = append(b.offered, ae)
	if r.Method == http.MethodGet {
		b.queries++
	} else {
		b.posts++
		b.orders = 1
		if b.firstLost && b.posts == 1 {
			b.mu.Unlock()
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
	}
	b.mu.Unlock()
	body := `{"state":"succeeded","resourceId":"ord_1"}`
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.Contains(ae, "br"):
		// Brotli bytes: nothing idem can read without a decoder, and
		// idem takes no dependency for one.
		w.Header().Set("Content-Encoding", "br")
		_, _ = w.Write([]byte{0x1b, 0x29, 0x00, 0xf8, 0x8d, 0x94, 0x6e, 0xde, 0xb4, 0xd7})
	case strings.Contains(ae, "gzip"):
		coding := "gzip"
		if ae == "x-gzip" {
			coding = ae // named as it was asked for
		}
		w.Header().Set("Content-Encoding", coding)
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, body)
		_ = zw.Close()
	default:
		_, _ = io.WriteString(w, body)
	}
}

// A journaled Accept-Encoding copied from a browser's or another
// client's request offers codings idem cannot decode: the CDN answered
// every submit and query in Brotli, no answer ever proved anything, and
// an order made at once was resent until the call gave up, unknown, and
// then until its key window passed. idem offers only what it reads.
func TestUnreadableCodingIsNotOffered(t *testing.T) {
	for _, tt := range []struct {
		name             string
		firstLost        bool
		posts, queries   int
		resultEndpoint   bool
		journaledCodings string
	}{
		{name: "submit", posts: 1, journaledCodings: "gzip, deflate, br"},
		{name: "result query after a lost answer", firstLost: true, posts: 1, queries: 1, resultEndpoint: true, journaledCodings: "br;q=1.0, gzip;q=0.8, *;q=0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBrotliCDN(t, tt.firstLost)
			var opts []idem.Option
			if tt.resultEndpoint {
				opts = append(opts, idem.WithResultEndpoint("/operations/{key}"))
			}
			c := clientFor(t, b.srv, idemtest.NewClock(epoch), opts...)

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: b.srv.URL + "/orders",
				Header: http.Header{"Accept-Encoding": {tt.journaledCodings}}, Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "ord_1", res.ResourceID)
			require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_1"}`, string(res.Body))

			b.mu.Lock()
			defer b.mu.Unlock()
			require.Equal(t, 1, b.orders, "orders")
			require.Equal(t, tt.posts, b.posts, "submits")
			require.Equal(t, tt.queries, b.queries, "result queries")
			for i, ae := range b.offered {
				require.NotContainsf(t, ae, "br", "request %d offered %q", i+1, ae)
			}
		})
	}
}

// What idem can read is left as journaled: a gzip-only or identity
// Accept-Encoding goes out as it is.
func TestReadableCodingIsKept(t *testing.T) {
	for _, ae := range []string{"gzip", "identity", "x-gzip, identity;q=0.5", "deflate;q=0, gzip", "GZIP, zstd; q=0.000"} {
		t.Run(ae, func(t *testing.T) {
			b := newBrotliCDN(t, false)
			c := clientFor(t, b.srv, idemtest.NewClock(epoch))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: b.srv.URL + "/orders",
				Header: http.Header{"Accept-Encoding": {ae}}, Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, "ord_1", res.ResourceID)
			b.mu.Lock()
			defer b.mu.Unlock()
			require.Equal(t, []string{ae}, b.offered)
		})
	}
}

// A journaled Accept-Encoding of x-gzip is kept (idem reads it: x-gzip is
// gzip, RFC 9110 8.4.1.3), so an answer in x-gzip must be decoded too: a
// server that names the coding as it was asked for answered every submit
// and query in bytes idem left compressed, and the order, made at once,
// never settled.
func TestXGzipAnswerIsDecoded(t *testing.T) {
	b := newBrotliCDN(t, false)
	c := clientFor(t, b.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: b.srv.URL + "/orders",
		Header: http.Header{"Accept-Encoding": {"x-gzip"}}, Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "ord_1", res.ResourceID)
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Equal(t, 1, b.posts, "submits")
}
