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
	path := journalOfUnknowns(t, map[string]func(*journal.Record){
		"k-traced":   func(r *journal.Record) { r.Trace = stuckTraceparent },
		"k-untraced": func(*journal.Record) {},
	})
	eachShowMode(t, path, func(mode string, args []string) {
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
	})
}

// journalOfUnknowns is a journal file holding, for each key, an unknown
// operation sent once, as set changes it.
func journalOfUnknowns(t *testing.T, set map[string]func(*journal.Record)) string {
	t.Helper()
	f := newJournal(t)
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"amount":1200}`)
	for key, change := range set {
		r := &journal.Record{
			Scope: "default", Key: key, Method: "POST", URL: "https://api.example.com/v1/payments",
			Body: body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown,
			Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: start, Wrote: true}},
			Created:  start, FirstSent: start, Updated: start, NextDue: start.Add(time.Minute),
		}
		change(r)
		_, err = s.Create(context.Background(), r)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	return f.path
}

// eachShowMode calls fn with the arguments that read the journal at
// path from the file, then through the admin handler.
func eachShowMode(t *testing.T, path string, fn func(mode string, args []string)) {
	t.Helper()
	for _, mode := range []string{"-journal", "-url"} {
		args := []string{"-journal", path}
		if mode == "-url" {
			args = []string{"-url", serveJournal(t, path)}
		}
		fn(mode, args)
	}
}
