package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowProvider is the payment API answering the earlier process's orders
// slowly, as an acquirer holding each request does: a send of one (a
// Resume visit) is held until release, or until its attempt ends; the
// service's new orders pass.
type slowProvider struct {
	next    http.RoundTripper
	release chan struct{}
	holding atomic.Int64 // Resume's sends held now
	beside  atomic.Int64 // new orders sent while one was
}

func (p *slowProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.GetBody != nil {
		b, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(b)
		b.Close()
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(body, []byte(`"order":"earlier-`)) {
			if p.holding.Load() > 0 {
				p.beside.Add(1)
			}
			return p.next.RoundTrip(r)
		}
		p.holding.Add(1)
		defer p.holding.Add(-1)
		select {
		case <-p.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return p.next.RoundTrip(r)
}

// logWatch tells when the service logs that Resume returned.
type logWatch struct {
	once    sync.Once
	resumed chan struct{}
}

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "resumed" {
		w.once.Do(func() { close(w.resumed) })
	}
	return nil
}
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

// A Resume that outlasts the start-up bound (here its sends held by a
// slow provider) made the service exit at start-up ("resume: context
// deadline exceeded"): restarted, it met the same backlog and exited
// again, and never served. It now serves beside it: the orders are taken
// while Resume's sends are held, and Resume, released, visits all three
// of the earlier process's orders, none paid twice.
func TestResumeOutlastingStartupServesBesideIt(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Every = 10 * time.Millisecond
	cfg.MaxOrders = 5
	cfg.OpsAddr = "127.0.0.1:0"
	cfg.Startup = time.Millisecond // Resume's sends are held far longer
	p := &slowProvider{release: make(chan struct{})}
	cfg.provider = func(next http.RoundTripper) http.RoundTripper {
		p.next = next
		return p
	}
	logs := &logWatch{resumed: make(chan struct{})}
	var beside int64
	cfg.Inspect = func(string) {
		beside = p.beside.Load()
		close(p.release)
		select {
		case <-logs.resumed:
		case <-time.After(30 * time.Second):
			t.Error("Resume did not return within 30s of the provider answering")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := run(ctx, cfg, slog.New(logs))
	if err != nil {
		t.Fatalf("run() error = %v; want the service to serve beside a long Resume", err)
	}
	if rep.Taken != cfg.MaxOrders || beside == 0 {
		t.Errorf("taken %d orders, %d of them sent while Resume's were held; want %d, some while held", rep.Taken, beside, cfg.MaxOrders)
	}
	if rep.Resumed.Visited != 3 {
		t.Errorf("Resume visited %d; want the 3 left by the previous process", rep.Resumed.Visited)
	}
	if rep.Duplicates != 0 {
		t.Errorf("server-side duplicates = %d; want 0", rep.Duplicates)
	}
}
