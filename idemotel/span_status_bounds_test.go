package idemotel_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/idemkit/idem"
)

// garbleServer reads each request whole and answers it with one status
// line of 256 KiB that is no HTTP (a service of another protocol on the
// port, a proxy's banner): net/http's error quotes the whole line
// ("malformed HTTP response %q", net/http response.go ReadResponse),
// and its Transport reads up to MaxResponseHeaderBytes, 10 MiB by
// default, of it. It counts the requests it read.
func garbleServer(t testing.TB) (addr string, requests func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu sync.Mutex
		n  int
		wg sync.WaitGroup
	)
	line := "\x1b]0;" + strings.Repeat("A", 256<<10) + "\r\n"
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed by the cleanup
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				mu.Lock()
				n++
				mu.Unlock()
				_, _ = io.WriteString(conn, line)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// A span's status description holds an error's text, which may quote
// what the server sent; the OpenTelemetry SDK bounds attribute values
// (SpanLimits) but never a status description, and each attempt's span
// carried the whole 256 KiB line to the tracing backend. The journal
// keeps 512 bytes of it; the span now keeps as many, and the text stays
// valid UTF-8.
func TestAttemptSpanStatusIsBounded(t *testing.T) {
	addr, requests := garbleServer(t)
	f := newFakeAPI(t)
	c, err := idem.New(f.store, idem.WithClock(f.clk), idem.WithHooks(f.tel.inst.Hooks()))
	require.NoError(t, err)
	defer c.Close()

	_, err = c.Submit(context.Background(), idem.Request{Key: "a", URL: "http://" + addr + "/orders", Body: []byte(`{}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	failed := 0
	for _, s := range f.tel.spans.Ended() {
		d := s.Status().Description
		require.LessOrEqual(t, len(d), 512, "span %s status: %d bytes", s.Name(), len(d))
		require.True(t, utf8.ValidString(d), "span %s status %q", s.Name(), d)
		if s.Status().Code == codes.Error && s.Name() == http.MethodPost {
			failed++
			require.Contains(t, d, "malformed HTTP response")
		}
	}
	require.Equal(t, requests(), failed, "one failed span per request the server read")
	require.Positive(t, failed)
}
