package idem_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// FuzzPrepare builds Requests from arbitrary fields and holds Prepare to
// its contract: it never panics; it either journals the request or
// refuses it with ErrInvalidRequest or ErrSecretHeader and journals
// nothing; and what it journals, it recognises as the same request again,
// in this process and after a restart (a journaled request that compared
// unequal to itself would be refused as a key conflict for ever, or worse,
// one that compared equal to another would be sent under the old key).
func FuzzPrepare(f *testing.F) {
	type seed struct {
		key, scope, ref, method, url, hname, hvalue string
		body                                        []byte
	}
	for _, s := range []seed{
		{"k1", "", "", "", "http://127.0.0.1:1/orders", "", "", []byte(`{"amount":1}`)},
		{"", "acct-2", "order-7", "PUT", "https://api.example.com/v1/x?y=1#frag", "X-Request-Source", "batch", nil},
		{"k\x00", "s p", "r", "post", "ftp://x/y", "Authorization", "Bearer x", []byte{0xff}},
		{"k2", "s", "", "PATCH", "http://u:p@127.0.0.1/x", "Content-Length", "3", []byte("abc")},
		{"k3", "s", "", "POST", "http://127.0.0.1/a b?api_key=1", "x-lower", "v\r\nInjected: 1", nil},
		{"\"q\"", "a,b", "\xff", "DELETE", "HTTP://Example.COM./o", "Accept-Encoding", "br", []byte("{}")},
	} {
		f.Add(s.key, s.scope, s.ref, s.method, s.url, s.hname, s.hvalue, s.body)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, key, scope, ref, method, url, hname, hvalue string, body []byte) {
		path := filepath.Join(t.TempDir(), "idem.journal")
		open := func() (*journal.Store, *idem.Client) {
			store, err := journal.Open(path, journal.WithUnsafeNoSync())
			if err != nil {
				t.Fatal(err)
			}
			c, err := idem.New(store)
			if err != nil {
				t.Fatal(err)
			}
			return store, c
		}
		store, c := open()
		req := idem.Request{Key: key, Scope: scope, Ref: ref, Method: method, URL: url, Body: body}
		if hname != "" {
			req.Header = http.Header{hname: {hvalue}}
		}
		op, err := c.Prepare(ctx, req)
		if err != nil {
			if !errors.Is(err, idem.ErrInvalidRequest) && !errors.Is(err, idem.ErrSecretHeader) {
				t.Fatalf("Prepare(%+v) = %v; want nil, ErrInvalidRequest or ErrSecretHeader", req, err)
			}
			recs, lerr := store.List(ctx, journal.Filter{})
			if lerr != nil || len(recs) != 0 {
				t.Fatalf("Prepare refused (%v) but the journal holds %d records (%v)", err, len(recs), lerr)
			}
			_ = c.Close()
			_ = store.Close()
			return
		}
		if key != "" && op.Key != key {
			t.Fatalf("Prepare journaled key %q; want %q", op.Key, key)
		}
		rec, err := store.Get(ctx, op.Scope, op.Key)
		if err != nil {
			t.Fatalf("Get of the prepared operation: %v", err)
		}
		if !bytes.Equal(rec.Body, body) {
			t.Fatalf("journaled body %q; want %q", rec.Body, body)
		}
		// The same request again, with the key Prepare chose.
		req.Key = op.Key
		if _, err := c.Prepare(ctx, req); err != nil {
			t.Fatalf("Prepare of the same request again = %v; want the journaled operation", err)
		}
		_ = c.Close()
		_ = store.Close()

		store, c = open()
		defer func() { _ = c.Close(); _ = store.Close() }()
		again, err := c.Prepare(ctx, req)
		if err != nil {
			t.Fatalf("Prepare of the same request after a restart = %v; want the journaled operation", err)
		}
		if again.Key != op.Key || again.URL != op.URL || again.Method != op.Method {
			t.Fatalf("after a restart Prepare returned %s %s key %q; want %s %s key %q", again.Method, again.URL, again.Key, op.Method, op.URL, op.Key)
		}
		// Another body under the journaled key is a conflict, never the
		// journaled operation.
		other := req
		other.Body = append(append([]byte(nil), body...), '!')
		if _, err := c.Prepare(ctx, other); !errors.Is(err, idem.ErrKeyConflict) {
			t.Fatalf("Prepare of another body under key %q = %v; want ErrKeyConflict", op.Key, err)
		}
	})
}
