package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// BenchmarkSubmit measures one happy-path operation end to end against the
// in-process fake server, journal fsync off so that the client's own CPU
// and allocations show. The comparisons with bare net/http, with fsync on,
// and with other clients live in the bench/ module.
func BenchmarkSubmit(b *testing.B) {
	srv := idemtest.NewServer(idemtest.WithMaxKeys(10_000_000))
	defer srv.Close()
	store, err := journal.Open(filepath.Join(b.TempDir(), "bench.journal"), journal.WithUnsafeNoSync())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithResultEndpoint(srv.URL+"/operations/{key}"),
		idem.WithRequestHook(func(r *http.Request) error { r.Header.Set("Authorization", "Bearer bench"); return nil }))
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Submit(ctx, idem.Request{Key: "bench-" + strconv.Itoa(i), URL: srv.URL + "/orders", Body: body}); err != nil {
			b.Fatal(err)
		}
	}
}
