package bench

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// BenchmarkClientJournaled is BenchmarkClientAlone over the bbolt journal,
// its sync off: idem's client and journal, one caller, no sockets and no
// server. Its allocs/op, B/op and (under callgrind) instructions per
// operation do not depend on the machine's load, so it measures the
// sync-off row's client CPU where wall-clock figures are noise. The
// journal is checkpointed before the timer stops, so the applier's copy of
// the operations into the file is in the figures.
func BenchmarkClientJournaled(b *testing.B) {
	s, err := journal.Open(filepath.Join(b.TempDir(), "bench.journal"), journal.WithUnsafeNoSync())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := idem.New(s, idem.WithHTTPClient(&http.Client{Transport: &answering{}}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := c.Submit(ctx, idem.Request{URL: "http://api.example/v1/orders", Body: body})
		if err != nil || res.State != idem.StateSucceeded {
			b.Fatal(res, err)
		}
	}
	if err := s.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}
