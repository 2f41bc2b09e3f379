package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// BenchmarkSubmit measures one happy-path operation end to end against the
// in-process fake server, journal fsync off so that the client's own CPU
// and allocations show; the HTTP client is idem's default (64 idle
// connections per host). The comparisons with bare net/http, with fsync on,
// and with other clients live in the bench/ module.
func BenchmarkSubmit(b *testing.B) {
	b.Run("callers=1", func(b *testing.B) { benchmarkSubmit(b, 1) })
	b.Run("callers=64", func(b *testing.B) { benchmarkSubmit(b, 64) })
}

func benchmarkSubmit(b *testing.B, callers int) {
	srv, err := idemtest.NewServer(idemtest.WithMaxKeys(10_000_000))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	store, err := journal.Open(filepath.Join(b.TempDir(), "bench.journal"), journal.WithUnsafeNoSync())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	c, err := idem.New(store, idem.WithResultEndpoint(srv.URL+"/operations/{key}"),
		idem.WithRequestHook(func(r *http.Request) error { r.Header.Set("Authorization", "Bearer bench"); return nil }))
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "bench-" + strconv.FormatInt(n.Add(1), 10)
			if _, err := c.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
