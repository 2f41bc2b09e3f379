package main

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// resumeReadFails is the journal on a disk failing under the service: its
// first read of the open operations (Resume's) is held until release,
// then fails with EIO; every other call passes.
type resumeReadFails struct {
	idem.Store
	path    string
	read    atomic.Bool
	release chan struct{}
}

func (s *resumeReadFails) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	if !s.read.CompareAndSwap(false, true) {
		return s.Store.ForEachOpen(ctx, fn)
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return &fs.PathError{Op: "read", Path: s.path, Err: syscall.EIO}
}

// logLines keeps what the service logs; once it logs that Resume outlasts
// the start-up bound, it releases the failing read.
type logLines struct {
	mu      sync.Mutex
	lines   []string
	serving func()
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	if strings.HasPrefix(r.Message, "resume outlasts the start-up bound") {
		l.serving()
	}
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// find returns the first line logged that has each of words.
func (l *logLines) find(words ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, w := range words {
			if !strings.Contains(line, w) {
				continue next
			}
		}
		return line, true
	}
	return "", false
}

// A Resume that outlasted the start-up bound and then failed on the
// journal (a disk returning EIO) was logged by nobody while the service
// served: its error waited for shutdown, minutes or days later, while the
// operator saw a healthy service. It is now logged at Error when Resume
// returns, while the orders are still being taken, and shutdown still
// returns it.
func TestResumeFailingAfterStartupIsLoggedWhileServing(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Every = 10 * time.Millisecond
	cfg.MaxOrders = 3
	cfg.OpsAddr = "127.0.0.1:0"
	cfg.Startup = time.Millisecond
	var release sync.Once
	failing := &resumeReadFails{release: make(chan struct{})}
	logs := &logLines{serving: func() { release.Do(func() { close(failing.release) }) }}
	cfg.open = func(path string, opts ...idem.Option) (*idem.Client, error) {
		js, err := journal.Open(path)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = js.Close() })
		failing.Store, failing.path = js, path
		return idem.New(failing, opts...)
	}
	cfg.Inspect = func(string) {
		// Still serving: shutdown has not begun.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, ok := logs.find("ERROR", "resume failed while serving", syscall.EIO.Error()); ok {
				return
			}
			if time.Now().After(deadline) {
				t.Error("resume's failure not logged within 30s of its read failing; want it logged while serving")
				return
			}
			time.Sleep(5 * time.Millisecond) // polling the log, bounded by the deadline
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := run(ctx, cfg, slog.New(logs))
	if !errors.Is(err, syscall.EIO) || !strings.HasPrefix(err.Error(), "resume: ") {
		t.Errorf("run() error = %v; want resume's EIO, returned at shutdown", err)
	}
	if _, ok := logs.find("shutting down"); !ok {
		t.Error("no shutdown logged")
	}
}
