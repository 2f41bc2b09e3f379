package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// stuckTraceparent is a W3C traceparent as idemotel journals one
// (https://www.w3.org/TR/trace-context/#traceparent-header, its example).
const stuckTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestShowTrace: the trace context of the call that journaled an
// operation (Hooks.Trace, kept in journal.Record.Trace) was printed by
// neither show nor show -json, in file mode or through the admin handler:
// the one link a person reviewing a stuck operation has to the request,
// and its logs, that started it. Both modes print it now, and an
// operation journaled without one prints no trace line.
func TestShowTrace(t *testing.T) {
	f := newJournal(t)
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"amount":1200}`)
	for key, trace := range map[string]string{"k-traced": stuckTraceparent, "k-untraced": ""} {
		_, err = s.Create(context.Background(), &journal.Record{
			Scope: "default", Key: key, Method: "POST", URL: "https://api.example.com/v1/payments",
			Body: body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown, Trace: trace,
			Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: start, Wrote: true}},
			Created:  start, FirstSent: start, Updated: start, NextDue: start.Add(time.Minute),
		})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	for _, mode := range []string{"-journal", "-url"} {
		args := []string{"-journal", f.path}
		if mode == "-url" {
			args = []string{"-url", serveJournal(t, f.path)}
		}
		stdout, stderr, code := runIdem(t, append(args, "show", "k-traced")...)
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, `(?m)^trace:\s+`+stuckTraceparent+`$`, stdout, mode)

		stdout, stderr, code = runIdem(t, append(args, "show", "-json", "k-traced")...)
		require.Equal(t, 0, code, stderr)
		var got struct {
			Trace string `json:"trace"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
		require.Equal(t, stuckTraceparent, got.Trace, mode)

		stdout, stderr, code = runIdem(t, append(args, "show", "k-untraced")...)
		require.Equal(t, 0, code, stderr)
		require.NotContains(t, stdout, "trace:", mode)
		stdout, stderr, code = runIdem(t, append(args, "show", "-json", "k-untraced")...)
		require.Equal(t, 0, code, stderr)
		require.NotContains(t, stdout, `"trace"`, mode)
	}
}
