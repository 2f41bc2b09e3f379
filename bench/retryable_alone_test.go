package bench

import (
	"context"
	"net/http"
	"testing"
)

// BenchmarkRetryableAlone is go-retryablehttp over the in-memory transport
// BenchmarkClientAlone uses: the same request (1 KiB body, a fresh key)
// and the same answer, so the two's allocs/op, B/op and callgrind
// instructions per operation differ by what the clients themselves do.
func BenchmarkRetryableAlone(b *testing.B) {
	r, err := openRetryable("")
	if err != nil {
		b.Fatal(err)
	}
	r.(*retryable).c.HTTPClient = &http.Client{Transport: &answering{}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.do(ctx, "http://api.example/v1/orders"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareAlone is a plain net/http POST over the same transport.
func BenchmarkBareAlone(b *testing.B) {
	c := &bare{hc: &http.Client{Transport: &answering{}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.do(ctx, "http://api.example/v1/orders"); err != nil {
			b.Fatal(err)
		}
	}
}
