package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/idemtest"
)

// testConfig is a small, fast run of the demo with the default faults.
func testConfig(t testing.TB) config {
	t.Helper()
	cfg := defaultConfig()
	cfg.Orders = 60
	cfg.Workers = 8
	cfg.FaultDelay = 300 * time.Millisecond
	cfg.SettleTimeout = 20 * time.Second
	cfg.Quiet = true
	return cfg
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*config)
	}{
		{"defaults", func(*config) {}},
		{"no crash", func(c *config) { c.CrashAfter = 0 }},
		{"crash early", func(c *config) { c.CrashAfter = 5 }},
		{"drops only", func(c *config) {
			c.Rates = map[idemtest.FaultKind]float64{idemtest.DropAfterCommit: 0.5}
		}},
		{"kept journal", func(c *config) { c.Journal = filepath.Join(t.TempDir(), "orders.journal") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			tt.modify(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			start := time.Now()
			sum, err := run(ctx, cfg, &out, io.Discard)
			if err != nil {
				t.Fatalf("run() error = %v\n%s", err, out.String())
			}
			t.Logf("run took %v", time.Since(start))
			if sum.Duplicates != 0 || sum.MaxEffectsPerKey > 1 {
				t.Errorf("duplicates = %d, max effects per key = %d; want 0, at most 1", sum.Duplicates, sum.MaxEffectsPerKey)
			}
			if sum.Lost != 0 {
				t.Errorf("lost = %d; want 0", sum.Lost)
			}
			if sum.Disagree != 0 || sum.NotSubmitted != 0 || len(sum.Errors) != 0 {
				t.Errorf("disagree = %d, not submitted = %d, errors = %q; want none", sum.Disagree, sum.NotSubmitted, sum.Errors)
			}
			if sum.Operations != cfg.Orders || sum.Open != 0 {
				t.Errorf("operations = %d, open = %d; want %d, 0", sum.Operations, sum.Open, cfg.Orders)
			}
			if sum.Succeeded+sum.Failed != cfg.Orders {
				t.Errorf("succeeded %d + failed %d; want %d", sum.Succeeded, sum.Failed, cfg.Orders)
			}
			if sum.Server.SideEffects != sum.Succeeded {
				t.Errorf("orders on the server = %d; want %d (one per succeeded operation)", sum.Server.SideEffects, sum.Succeeded)
			}
			if cfg.crashPoint() > 0 && sum.CrashedAt == 0 {
				t.Errorf("CrashedAt = 0; want a crash after %d orders", cfg.crashPoint())
			}
			if !sum.OK() {
				t.Errorf("OK() = false\n%s", out.String())
			}
			if o := sum.OpenAtRestart; sum.CrashedAt > 0 && o.Abandoned+o.HandedOff+o.Other != sum.Resume.Visited {
				t.Errorf("open at restart %+v does not add up to the %d resumed", o, sum.Resume.Visited)
			}
			if sum.CrashedAt > 0 && !strings.Contains(out.String(), "handed off before it") {
				t.Errorf("summary does not say why resumed can exceed abandoned:\n%s", out.String())
			}
			for _, want := range []string{"server-side duplicates: 0; lost: 0; OK"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("summary lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestCrashPoint(t *testing.T) {
	tests := []struct {
		after float64
		want  int
	}{
		{0, 0}, {0.5, 30}, {0.001, 1}, {1, 1}, {25, 25}, {1000, 60},
	}
	for _, tt := range tests {
		c := config{Orders: 60, CrashAfter: tt.after}
		if got := c.crashPoint(); got != tt.want {
			t.Errorf("crashPoint(-crash-after %v, -n 60) = %d; want %d", tt.after, got, tt.want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, err := parseFlags(fs, []string{"-n", "10", "-c", "2", "-drop-after-commit", "0.3", "-crash-after", "4", "-seed", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Orders != 10 || cfg.Workers != 2 || cfg.Seed != 7 || cfg.CrashAfter != 4 {
		t.Errorf("parseFlags() = n %d, c %d, seed %d, crash-after %v; want 10, 2, 7, 4", cfg.Orders, cfg.Workers, cfg.Seed, cfg.CrashAfter)
	}
	if got := cfg.Rates[idemtest.DropAfterCommit]; got != 0.3 {
		t.Errorf("drop rate = %v; want 0.3", got)
	}
	if got := cfg.Rates[idemtest.Unavailable]; got != defaultConfig().Rates[idemtest.Unavailable] {
		t.Errorf("unavailable rate = %v; want the default", got)
	}
}

func TestRunRejects(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*config)
	}{
		{"rates over 1", func(c *config) { c.Rates[idemtest.DropAfterCommit] = 0.9 }},
		{"no orders", func(c *config) { c.Orders = 0 }},
		{"existing journal", func(c *config) { c.Journal = "main.go" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			tt.modify(&cfg)
			if _, err := run(context.Background(), cfg, io.Discard, io.Discard); err == nil {
				t.Error("run() error = nil; want an error")
			}
		})
	}
}

// TestFaultFlagsAreTheKinds: each fault flag is the fault's kind, the word
// idemtest, POST /_faults and cmd/idem-fakeserver use (the demo had -drop,
// -lag, -slow, -garbage, -truncated and -delay).
func TestFaultFlagsAreTheKinds(t *testing.T) {
	for _, f := range faultFlags {
		fs := flag.NewFlagSet("orders", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := parseFlags(fs, []string{"-" + string(f.kind), "0.5"})
		if err != nil {
			t.Fatalf("-%s: %v", f.kind, err)
		}
		if got := cfg.Rates[f.kind]; got != 0.5 {
			t.Errorf("-%s 0.5: rate of %s = %v; want 0.5", f.kind, f.kind, got)
		}
	}
}

// TestRenamedFaultFlagsAreRefused: a former name fails, naming the flag to
// use, and the usage does not list it.
func TestRenamedFaultFlagsAreRefused(t *testing.T) {
	for old, now := range renamedFlags {
		fs := flag.NewFlagSet("orders", flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		_, err := parseFlags(fs, []string{"-" + old, "0.1"})
		want := "renamed: use -" + string(now)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-%s: error %v; want one containing %q", old, err, want)
		}
		if !strings.Contains(out.String(), "-h for the flags") || strings.Contains(out.String(), "usage:") {
			t.Errorf("-%s: output %q; want the error and a pointer to -h, not the whole usage", old, out.String())
		}
	}
}

// TestUsageNamesTheProgram: -h printed "Usage of /tmp/go-build…/exe/orders",
// the binary go run builds; it names the command one types.
func TestUsageNamesTheProgram(t *testing.T) {
	fs := flag.NewFlagSet("/tmp/go-build123/b001/exe/orders", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	if _, err := parseFlags(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseFlags(-h) error = %v; want flag.ErrHelp", err)
	}
	help := out.String()
	if !strings.HasPrefix(help, "usage: go run ./examples/orders [flags]\n") || strings.Contains(help, "go-build") {
		t.Errorf("usage does not name the program:\n%s", help)
	}
	for _, f := range faultFlags {
		if !strings.Contains(help, "  -"+string(f.kind)+" float") {
			t.Errorf("usage lacks -%s:\n%s", f.kind, help)
		}
	}
	for old := range renamedFlags {
		if strings.Contains(help, "  -"+old+" ") {
			t.Errorf("usage lists the former name -%s", old)
		}
	}
}
