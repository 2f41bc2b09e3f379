package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Every = 20 * time.Millisecond
	cfg.MaxOrders = 60
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	rep, err := run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("run() error = %v", err)
	}
	if rep.Resumed.Visited != 3 {
		t.Errorf("Resume visited %d; want the 3 left by the previous process", rep.Resumed.Visited)
	}
	if rep.Taken == 0 || rep.SettledInCall+rep.HandedOff != rep.Taken {
		t.Errorf("taken %d, settled in the call %d, handed off %d; want some, all accounted for", rep.Taken, rep.SettledInCall, rep.HandedOff)
	}
	if rep.SettledInBackground < rep.Resumed.Succeeded+rep.Resumed.Failed {
		t.Errorf("settled in the background = %d; want at least Resume's %d", rep.SettledInBackground, rep.Resumed.Succeeded+rep.Resumed.Failed)
	}
	if rep.Duplicates != 0 {
		t.Errorf("server-side duplicates = %d; want 0", rep.Duplicates)
	}
}

// A journal kept between runs: the second start resumes what the first
// left open, and the first one's journal lock is released at shutdown.
func TestRunTwice(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Journal = filepath.Join(t.TempDir(), "service.journal")
	cfg.Every = 20 * time.Millisecond
	cfg.MaxOrders = 20
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rep, err := run(ctx, cfg, log)
		cancel()
		if err != nil {
			t.Fatalf("run %d: error = %v", i+1, err)
		}
		if rep.Duplicates != 0 {
			t.Errorf("run %d: server-side duplicates = %d; want 0", i+1, rep.Duplicates)
		}
	}
}
