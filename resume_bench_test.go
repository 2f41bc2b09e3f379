package idem_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

var backlog = flag.Int("backlog", 10_000, "BenchmarkResumeBacklog: operations an outage leaves unknown")

// BenchmarkResumeBacklog: an outage leaves -backlog operations unknown
// (half executed with the answer lost, half never executed); the server
// recovers; one Resume at default settings (fsync on, default retry
// budget, real clock) must settle all of them. Reported: the Resume's wall
// time and operations settled per second. Run it once:
//
//	go test -run='^$' -bench=ResumeBacklog -benchtime=1x .
func BenchmarkResumeBacklog(b *testing.B) {
	for range b.N {
		b.StopTimer()
		srv, err := idemtest.NewServer(idemtest.WithSeed(1), idemtest.WithMaxKeys(10*(*backlog)),
			idemtest.WithProfile(idemtest.Profile{Rates: map[idemtest.FaultKind]float64{
				idemtest.DropAfterCommit: 0.5, idemtest.ErrorBeforeCommit: 0.5}}))
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(b.TempDir(), "backlog.journal")
		opts := []idem.Option{idem.WithResultEndpoint(srv.URL + "/operations/{key}"),
			idem.WithRequestHook(func(r *http.Request) error { r.Header.Set("Authorization", "Bearer bench"); return nil })}
		c, err := idem.Open(path, append(opts, idem.WithMaxAttempts(1))...)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		unknown := 0
		for i := range *backlog {
			_, err := c.Submit(ctx, idem.Request{URL: srv.URL + "/orders", Body: fmt.Appendf(nil, `{"order":%d}`, i)})
			switch {
			case errors.Is(err, idem.ErrUnknownOutcome):
				unknown++
			case err != nil:
				b.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		if err := srv.SetProfile(idemtest.Profile{}); err != nil {
			b.Fatal(err)
		}

		c, err = idem.Open(path, opts...) // a restart at default settings
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		sum, err := c.Resume(ctx)
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil || sum.Succeeded != unknown || sum.Visited != unknown {
			b.Fatalf("Resume() = %+v, %v; want %d visited and succeeded", sum, err, unknown)
		}
		if st := srv.Stats(); st.MaxEffectsPerKey > 1 {
			b.Fatalf("max effects per key %d", st.MaxEffectsPerKey)
		}
		b.ReportMetric(float64(unknown), "unknown")
		b.ReportMetric(elapsed.Seconds(), "resume-s")
		b.ReportMetric(float64(unknown)/elapsed.Seconds(), "settled/s")
		_ = c.Close()
		srv.Close()
		b.StartTimer()
	}
}
