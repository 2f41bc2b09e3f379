package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Every = 20 * time.Millisecond
	cfg.MaxOrders = 60
	cfg.OpsAddr = "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	rep, err := run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("run() error = %v", err)
	}
	if rep.Resumed.Visited != 3 {
		t.Errorf("Resume visited %d; want the 3 left by the previous process", rep.Resumed.Visited)
	}
	if rep.Taken == 0 || rep.SettledInCall+rep.HandedOff+rep.Review != rep.Taken {
		t.Errorf("taken %d, settled in the call %d, handed off %d, for review %d; want some, all accounted for",
			rep.Taken, rep.SettledInCall, rep.HandedOff, rep.Review)
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
	cfg.OpsAddr = "127.0.0.1:0"
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

// The running service serves Prometheus metrics from the OpenTelemetry
// layer and the admin handler, and both agree with the journal.
func TestOpsEndpoints(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Every = 10 * time.Millisecond
	cfg.MaxOrders = 20
	cfg.OpsAddr = "127.0.0.1:0"
	var metrics, stats []byte
	var statsCode int
	cfg.Inspect = func(base string) {
		metrics, _ = get(t, base+"/metrics")
		stats, statsCode = get(t, base+"/idem/stats")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("run() error = %v", err)
	}
	if rep.Taken != cfg.MaxOrders {
		t.Fatalf("taken %d orders; want %d", rep.Taken, cfg.MaxOrders)
	}

	// Every settlement Resume made before the scrape is counted.
	succeeded := sample(t, metrics, `idem_operation_outcomes_total\{[^}]*idem_outcome="succeeded"[^}]*\} (\S+)`)
	if succeeded < float64(rep.Resumed.Succeeded) {
		t.Errorf("idem_operation_outcomes_total{succeeded} = %v; want at least Resume's %d", succeeded, rep.Resumed.Succeeded)
	}
	if n := sample(t, metrics, `idem_attempts_total\{[^}]*idem_attempt_kind="submit"[^}]*\} (\S+)`); n < 3 {
		t.Errorf("idem_attempts_total{submit} = %v; want at least the 3 resumed submits", n)
	}
	for _, name := range []string{"idem_operations_open", "idem_operations_unknown", "idem_operations_flagged",
		"idem_operations_oldest_unknown_age_seconds", "idem_retry_budget_tokens", "idem_attempt_duration_seconds_bucket"} {
		if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).Match(metrics) {
			t.Errorf("/metrics has no %s", name)
		}
	}

	if statsCode != http.StatusOK {
		t.Fatalf("GET /idem/stats = %d: %s", statsCode, stats)
	}
	var st struct {
		Total int `json:"total"`
		Open  int `json:"open"`
	}
	if err := json.Unmarshal(stats, &st); err != nil {
		t.Fatalf("GET /idem/stats: %v: %s", err, stats)
	}
	if st.Total < 3 || st.Total > 3+cfg.MaxOrders {
		t.Errorf("/idem/stats total = %d; want the 3 resumed orders and up to %d new ones", st.Total, cfg.MaxOrders)
	}
}

func get(t testing.TB, url string) ([]byte, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return nil, 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
	}
	return b, resp.StatusCode
}

// sample sums the values of the lines of a Prometheus exposition that
// match re (whose one group is the value).
func sample(t testing.TB, text []byte, re string) float64 {
	t.Helper()
	n := 0.0
	for _, m := range regexp.MustCompile(`(?m)^`+re+`$`).FindAllSubmatch(text, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatalf("sample %q: %v", m[0], err)
		}
		n += v
	}
	return n
}
