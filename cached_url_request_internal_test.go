package idem

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"testing"
)

// cachedURLs are URLs a caller may submit to, in the forms NewRequest
// normalises (an empty port, a zone, escapes, a fragment, upper case).
var cachedURLs = []string{
	"https://api.example.com/v1/orders",
	"http://127.0.0.1:8080/v1/orders?expand=customer&x=%20y",
	"http://h:/empty-port",
	"http://[::1]:/v6-empty-port",
	"http://[fe80::1%25en0]:8443/zone",
	"https://api.example.com/a%2Fb/c%20d",
	"https://api.example.com/x#frag",
	"HTTPS://API.example.com:443/Upper",
}

// A submit's request built from its cached URL is the one
// http.NewRequestWithContext builds from the URL as written: every
// field, the body and what GetBody gives again (net/http rewinds with it
// before a resend, and sentOnce wraps it), for a body and for none.
func TestCachedURLRequestIsNewRequests(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKeyForTest{}, 1)
	for _, raw := range cachedURLs {
		var c urlCache
		p, err := c.parse(raw)
		if err != nil {
			t.Fatalf("parse(%q): %v", raw, err)
		}
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet} {
			for _, body := range []string{`{"amount":1000}`, ""} {
				want, err := http.NewRequestWithContext(ctx, method, raw, bytes.NewReader([]byte(body)))
				if err != nil {
					t.Fatal(err)
				}
				var room requestRoom
				got, ok := p.newRequest(ctx, method, []byte(body), &room)
				if !ok {
					t.Fatalf("%s %q: newRequest refused the method", method, raw)
				}
				if got.URL != &room.url || *got.URL != *want.URL || got.Host != want.Host {
					t.Errorf("%s %q: URL %#v, Host %q; want %#v, %q in the caller's URL", method, raw, *got.URL, got.Host, *want.URL, want.Host)
				}
				if got.Context() != ctx {
					t.Errorf("%s %q: not the caller's context", method, raw)
				}
				for i := range 2 {
					g, gerr := got.GetBody()
					w, werr := want.GetBody()
					if gerr != nil || werr != nil || reflect.TypeOf(g) != reflect.TypeOf(w) || (w == http.NoBody) != (g == http.NoBody) {
						t.Fatalf("%s %q: GetBody gives %T, %v; want %T, %v", method, raw, g, gerr, w, werr)
					}
					gb, _ := io.ReadAll(g)
					wb, _ := io.ReadAll(w)
					if !bytes.Equal(gb, wb) {
						t.Errorf("%s %q: GetBody's %d read %q; want %q", method, raw, i, gb, wb)
					}
				}
				got.GetBody, want.GetBody = nil, nil
				got.URL, want.URL = nil, nil
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s %q: request %+v; want %+v", method, raw, got, want)
				}
			}
		}
	}
	// A method NewRequest must check for itself is left to it.
	var c urlCache
	p, _ := c.parse(cachedURLs[0])
	for _, method := range []string{"PROPFIND", "BAD METHOD", "", "post"} {
		if _, ok := p.newRequest(ctx, method, nil, new(requestRoom)); ok {
			t.Errorf("newRequest took method %q", method)
		}
	}
}

type ctxKeyForTest struct{}

// The cached URL's request costs two allocations less than NewRequest's
// parse of "" with the URL copied in and a reader of the body, the URL and
// the reader being the caller's (the trace's room for them); of an empty
// body four less: the URL, and the reader, its NopCloser and its GetBody,
// which NewRequest makes and then drops for NoBody.
func TestCachedURLRequestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are its own")
	}
	var c urlCache
	p, err := c.parse("http://127.0.0.1:8080/v1/orders")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var room requestRoom
	for _, tc := range []struct {
		body []byte
		less float64
	}{{[]byte(`{"amount":1000}`), 2}, {nil, 4}} {
		before := testing.AllocsPerRun(100, func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			p.setRequestURL(req)
		})
		now := testing.AllocsPerRun(100, func() {
			if _, ok := p.newRequest(ctx, http.MethodPost, tc.body, &room); !ok {
				t.Fatal("refused")
			}
		})
		if now != before-tc.less {
			t.Errorf("body %q: newRequest allocs = %v, NewRequest's = %v; want %v less", tc.body, now, before, tc.less)
		}
	}
}
