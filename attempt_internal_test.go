package idem

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAtMost holds readAtMost to what it replaces,
// io.ReadAll(io.LimitReader(r, n)), whatever the Content-Length says.
func TestReadAtMost(t *testing.T) {
	errRead := errors.New("connection reset")
	body := strings.Repeat("0123456789", 1000)
	readers := []struct {
		name string
		make func(s string) io.Reader
	}{
		{"whole", func(s string) io.Reader { return strings.NewReader(s) }},
		{"one byte at a time", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
		{"EOF with the data", func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) }},
		{"error at the end", func(s string) io.Reader { return io.MultiReader(strings.NewReader(s), iotest.ErrReader(errRead)) }},
	}
	for _, rd := range readers {
		for _, size := range []int{0, 1, 46, 511, 512, 513, 10000} {
			for _, n := range []int64{1, 47, 512, 513, 10001, 1 << 20} {
				for _, hint := range []int64{-1, 0, int64(size), int64(size) + 7, maxSizeHint + 1} {
					s := body[:size]
					want, wantErr := io.ReadAll(io.LimitReader(rd.make(s), n))
					got, err := readAtMost(rd.make(s), n, hint)
					if !bytes.Equal(got, want) || !errors.Is(err, wantErr) && err != wantErr {
						t.Fatalf("%s: readAtMost(%d bytes, n=%d, size=%d) = %d bytes, %v; want %d bytes, %v",
							rd.name, size, n, hint, len(got), err, len(want), wantErr)
					}
				}
			}
		}
	}
}

// A request hook changes the request's headers, never the journaled ones,
// and one header's append never lands in another's values: whether the
// values fit in the room given (the attempt's trace's) or not.
func TestCopyHeaderIsTheRequests(t *testing.T) {
	for _, size := range []int{0, 4, 5, 8} {
		t.Run(fmt.Sprint("room ", size), func(t *testing.T) { testCopyHeader(t, make([]string, size)) })
	}
}

func testCopyHeader(t *testing.T, given []string) {
	src := http.Header{"Content-Type": {"application/json"}, "X-A": {"1", "2"}, "X-B": {"3"}}
	orig := src.Clone()
	dst := http.Header{}
	room := copyHeader(dst, src, 1, given)
	// Four values and the spare: the spare is given's last slot when
	// they fit.
	fits := len(given) >= 5
	if inRoom := fits && &room[:1][0] == &given[4]; inRoom != fits {
		t.Fatalf("copyHeader() with room of %d: values in it %v; want %v", len(given), inRoom, fits)
	}
	if !equalHeader(dst, orig) {
		t.Fatalf("copyHeader() = %v; want %v", dst, orig)
	}
	if len(room) != 0 || cap(room) != 1 {
		t.Fatalf("copyHeader() room: len %d, cap %d; want 0, 1", len(room), cap(room))
	}
	dst["Idempotency-Key"] = append(room, "k")
	dst["X-A"] = append(dst["X-A"], "appended")
	dst["Content-Type"][0] = "changed"
	dst.Add("X-B", "added")
	if !equalHeader(src, orig) {
		t.Fatalf("journaled header after the hook's changes = %v; want %v", src, orig)
	}
	if got := dst["X-B"]; !slices.Equal(got, []string{"3", "added"}) {
		t.Fatalf("X-B = %q; want [3 added]", got)
	}
	dst.Add("Idempotency-Key", "again")
	if got := dst["Idempotency-Key"]; !slices.Equal(got, []string{"k", "again"}) {
		t.Fatalf("Idempotency-Key = %q; want [k again]", got)
	}
	for name, vals := range dst {
		if name != "Idempotency-Key" && slices.Contains(vals, "again") {
			t.Fatalf("%s = %q: an append to another header landed in it", name, vals)
		}
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// A request built from the cached parse is the one http.NewRequest builds
// from the journaled URL.
func TestRequestFromCachedURL(t *testing.T) {
	for _, raw := range cachedURLs {
		var c urlCache
		p, err := c.parse(raw)
		if err != nil {
			t.Fatalf("parse(%q): %v", raw, err)
		}
		want, err := http.NewRequest(http.MethodPost, raw, bytes.NewReader([]byte("body")))
		if err != nil {
			t.Fatal(err)
		}
		got, err := http.NewRequest(http.MethodPost, "", bytes.NewReader([]byte("body")))
		if err != nil {
			t.Fatal(err)
		}
		p.setRequestURL(got)
		if *got.URL != *want.URL || got.Host != want.Host {
			t.Errorf("%q: request URL %#v, Host %q; want %#v, %q", raw, *got.URL, got.Host, *want.URL, want.Host)
		}
		got.GetBody, want.GetBody = nil, nil
		got.URL, want.URL = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: request %+v; want %+v", raw, got, want)
		}
		if u, _ := url.Parse(raw); p.journaled != u.String() {
			t.Errorf("%q: journaled %q; want %q", raw, p.journaled, u.String())
		}
		if c.lookup(raw) != p || c.lookup(raw+"x") != nil {
			t.Errorf("%q: lookup does not find the parse, or finds it for another URL", raw)
		}
	}
}

// headerValue is Header.Get for the canonical names idem reads.
func TestHeaderValueIsGet(t *testing.T) {
	h := http.Header{"Retry-After": {"5", "6"}, "Idempotent-Replayed": {""}, "content-type": {"text/plain"}}
	for _, name := range []string{"Retry-After", "Idempotent-Replayed", "Content-Type", "X-Missing"} {
		if got, want := headerValue(h, name), h.Get(name); got != want {
			t.Errorf("headerValue(%q) = %q; want %q", name, got, want)
		}
	}
}
