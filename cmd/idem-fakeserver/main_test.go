package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

func TestHelpListsEveryFault(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-h"}, &stdout, &stderr)
	require.Equal(t, 0, code)
	require.Empty(t, stderr.String())
	help := stdout.String()
	for _, k := range fakeserver.FaultKinds() {
		require.Contains(t, help, "-"+rateFlag(k)+" rate", "flag of %s", k)
		require.Contains(t, help, k.Description(), "meaning of %s", k)
	}
	for _, name := range append(append(generalFlags, behaviorFlags...), webhookFlags...) {
		require.Contains(t, help, "-"+name, "flag %s", name)
	}
	for _, b := range fakeserver.Behaviors() {
		require.Contains(t, help, b.Name+" ", "preset %s", b.Name)
		require.Contains(t, help, b.Description(), "meaning of %s", b.Name)
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-retention", "soon"}, `invalid value "soon" for flag -retention`},
		{[]string{"-decline", "2"}, `invalid value "2" for flag -decline: want a probability between 0 and 1`},
		{[]string{"-throttle", "x"}, `invalid value "x" for flag -throttle`},
		{[]string{"-429", "0.1"}, `invalid value "0.1" for flag -429: renamed: use -throttle`},
		{[]string{"-503", "0.1"}, `invalid value "0.1" for flag -503: renamed: use -unavailable`},
		{[]string{"-500-after-commit", "0.1"}, `invalid value "0.1" for flag -500-after-commit: renamed: use -error-after-commit`},
		{[]string{"-500-before-commit", "0.1"}, `invalid value "0.1" for flag -500-before-commit: renamed: use -error-before-commit`},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"-addr", "0.0.0.0:8080"}, `-addr "0.0.0.0:8080" is not a loopback address; add -allow-remote`},
		{[]string{"-addr", ":8080"}, "is not a loopback address"},
		{[]string{"-addr", "localhost"}, `-addr "localhost": address localhost: missing port in address`},
		{[]string{"-unavailable", "0.6", "-error-before-commit", "0.6"}, "fault rates sum to 1.2; want at most 1"},
		{[]string{"-retention", "0s"}, "-retention 0s: want a positive duration"},
		{[]string{"-behavior", "stripe"}, `-behavior: unknown behavior "stripe" (want one of: ietf-draft, stored-errors, no-body-compare, conflict-417, short-window, client-order-id)`},
		{[]string{"-conflict-status", "200"}, "behavior conflict-200: conflict status 200 is not a 4xx"},
		{[]string{"-behavior", "short-window", "-retention", "1h"}, "retention 1h0m0s and behavior short-window's retention 30m0s differ (set one of them)"},
		{[]string{"-max-keys", "0"}, "-max-keys 0: want a positive number"},
		{[]string{"serve"}, `unexpected argument "serve"`},
		{[]string{"-key-header", "Request Id"}, `key header "Request Id" is not a valid header name (want a token such as Idempotency-Key, with no spaces, colons or other separators) (see -h)`},
		{[]string{"-scope-header", "X:Account"}, `scope header "X:Account" is not a valid header name`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			require.Equal(t, 2, code)
			require.Empty(t, stdout.String())
			require.Contains(t, stderr.String(), tt.want)
			require.True(t, strings.HasPrefix(stderr.String(), "idem-fakeserver: "), stderr.String())
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
		})
	}
}

func TestParseFlags(t *testing.T) {
	opts, err := parseFlags([]string{
		"-addr", "0.0.0.0:9000", "-allow-remote",
		"-key-header", "X-Request-Id", "-scope-header", "X-Account",
		"-retention", "1h", "-seed", "7", "-max-keys", "10", "-max-body", "100",
		"-drop-after-commit", "0.05", "-delay-response", "0.1", "-unavailable", "0.2",
		"-delay", "3s", "-retry-after", "2s", "-http-date",
	})
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9000", opts.addr)
	require.True(t, opts.allowRemote)
	require.Equal(t, fakeserver.Config{
		KeyHeader: "X-Request-Id", ScopeHeader: "X-Account", Retention: time.Hour,
		MaxKeys: 10, MaxBody: 100, Seed: 7, Behavior: fakeserver.IETFDraft(),
		Profile: fakeserver.Profile{
			Rates: map[fakeserver.FaultKind]float64{
				fakeserver.DropAfterCommit: 0.05, fakeserver.DelayResponse: 0.1, fakeserver.Unavailable: 0.2,
			},
			Delay: 3 * time.Second, RetryAfter: 2 * time.Second, HTTPDate: true,
		},
	}, opts.cfg)

	opts, err = parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:0", opts.addr)
	require.Nil(t, opts.cfg.Profile.Rates)
	require.Equal(t, fakeserver.IETFDraft(), opts.cfg.Behavior)
	require.Zero(t, opts.cfg.Retention, "the behaviour's window")

	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0", "127.0.0.2:80"} {
		_, err := parseFlags([]string{"-addr", addr})
		require.NoError(t, err, addr)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, w := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-seed", "3"}, w, &stderr)
		w.Close()
	}()

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	base, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "idem-fakeserver listening on ")
	require.True(t, ok, "first line %q", line)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, base)
	go io.Copy(io.Discard, out) // nothing else is printed, but never block run

	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	post := func(path, key, body string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp := post("/orders", "k1", "{}")
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	// A response delayed for an hour does not hold up the shutdown.
	resp = post("/_faults", "", `{"kind":"delay-response","delay":"1h"}`)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	delayed := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "k2")
		resp, err := c.Do(req)
		if err != nil {
			delayed <- 0
			return
		}
		resp.Body.Close()
		delayed <- resp.StatusCode
	}()
	require.Eventually(t, func() bool {
		resp, err := c.Get(base + "/_stats")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st fakeserver.Stats
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.SideEffects == 2
	}, 5*time.Second, 5*time.Millisecond)

	cancel()
	require.Equal(t, 0, <-done, "stderr: %s", stderr.String())
	require.Equal(t, http.StatusCreated, <-delayed, "the delayed request is answered at shutdown")
	require.Empty(t, stderr.String())
}

func TestRunListenError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-addr", "127.0.0.1:99999"}, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Empty(t, stdout.String())
	require.Contains(t, stderr.String(), "idem-fakeserver: listen tcp")
}

// TestBehaviorFlags: -behavior picks a preset by the name GET /_behavior
// reports; a knob flag that changes the preset leaves a behaviour named by
// its knobs; one that repeats it changes nothing.
func TestBehaviorFlags(t *testing.T) {
	tests := []struct {
		args []string
		want fakeserver.Behavior
	}{
		{[]string{"-behavior", "stored-errors"}, fakeserver.StoredErrors()},
		{[]string{"-behavior", "short-window"}, fakeserver.ShortWindow()},
		{[]string{"-behavior", "conflict-417", "-conflict-status", "417"}, fakeserver.Conflict417()},
		{[]string{"-behavior", "no-body-compare", "-no-body-compare"}, fakeserver.NoBodyCompare()},
		{[]string{"-store-errors"}, fakeserver.Behavior{StoreErrors: true}},
		{[]string{"-behavior", "stored-errors", "-no-body-compare", "-conflict-status", "409"},
			fakeserver.Behavior{StoreErrors: true, NoBodyCompare: true, ConflictStatus: 409}},
		{[]string{"-behavior", "stored-errors", "-store-errors=false"}, fakeserver.Behavior{}},
		// Not a preset (fakeserver.Behaviors), a knob: named as
		// fakeserver.KeyIgnored is.
		{[]string{"-key-ignored"}, fakeserver.Behavior{KeyIgnored: true}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			opts, err := parseFlags(tt.args)
			require.NoError(t, err)
			require.Equal(t, tt.want, opts.cfg.Behavior)
			srv, err := fakeserver.New(opts.cfg)
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/_behavior", nil))
			var got map[string]any
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
			require.Equal(t, tt.want.String(), got["name"])
		})
	}
}
