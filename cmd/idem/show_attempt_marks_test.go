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

// markedRecord journals an operation whose attempts carry each of the
// marks a reviewer judges it by, modelled on Whop's documented key
// handling (https://docs.whop.com/developer/api/idempotency): replayed
// responses "carry an Idempotent-Replayed: true header so you can tell a
// replay apart from a fresh execution" (attempt 3 and the result); and,
// modelled (the English page names no status for it), a retry while
// the first request with the key still executes is answered 409 with
// error.code idempotency_request_in_progress (attempt 2, refused).
// Attempt 1 is a copy net/http sent twice: "HTTP requests are considered
// idempotent if ... their Header map contains an "Idempotency-Key" or
// "X-Idempotency-Key" entry", and the Transport "only retries a request
// upon encountering a network error if the connection has been already
// been used successfully" (https://pkg.go.dev/net/http#Transport). A
// webhook event, recorded against the key another request held, carries
// its status and that mark.
func markedRecord(t *testing.T) (path string, start time.Time) {
	t.Helper()
	f := newJournal(t)
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	ctx := context.Background()
	start = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"amount":1200}`)
	_, err = s.Create(ctx, &journal.Record{
		Scope: "default", Key: "k-marks", Method: "POST", URL: "https://api.example.com/v1/payments",
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StateSucceeded, Review: journal.ReviewKeyInUse,
		Result: &journal.Result{ResourceID: "pay_9", StatusCode: 201, Replayed: true},
		Attempts: []journal.Attempt{
			{Number: 1, Kind: journal.AttemptSubmit, Start: start, Wrote: true, Resent: true, Done: true,
				Err: "net/http: timeout awaiting response headers", Duration: 30 * time.Second},
			{Number: 2, Kind: journal.AttemptSubmit, Start: start.Add(time.Minute), Wrote: true, Done: true, Refused: true,
				Status: 409, Err: "idempotency_request_in_progress", RetryAfter: time.Second, Duration: 40 * time.Millisecond},
			{Number: 3, Kind: journal.AttemptSubmit, Start: start.Add(2 * time.Minute), Wrote: true, Done: true, Replayed: true,
				Status: 201, Duration: 50 * time.Millisecond},
		},
		Created: start, FirstSent: start, Updated: start.Add(2 * time.Minute), Settled: start.Add(2 * time.Minute),
	})
	require.NoError(t, err)
	_, err = s.Confirm(ctx, "default", "k-marks", journal.Confirmation{
		State: journal.StateSucceeded, ResourceID: "pay_9", Source: "whop-webhook", EventID: "evt_3",
		Reason: "payment.succeeded", StatusCode: 201, At: start.Add(time.Hour), KeyInUse: true})
	require.ErrorIs(t, err, journal.ErrConfirmConflict, "a key-in-use event is kept as a conflict")
	require.NoError(t, s.Close())
	return f.path, start
}

// TestShowAttemptMarks: show printed neither whether an attempt was sent
// twice (Resent), refused (Refused: it did not execute) or answered with
// the server's stored answer (Replayed), nor whether the result was a
// replay, nor a confirmation's status and key-in-use mark: the marks a
// reviewer of ReviewKeyInUse or ReviewMaybeTwice judges the operation by
// (journal.Attempt.MaybeExecuted reads Refused). File mode and -url mode
// print the same.
func TestShowAttemptMarks(t *testing.T) {
	path, _ := markedRecord(t)
	outs := map[string]string{}
	for _, mode := range []string{"-journal", "-url"} {
		args := []string{"-journal", path}
		if mode == "-url" {
			args = []string{"-url", serveJournal(t, path)}
		}
		stdout, stderr, code := runIdem(t, append(args, "show", "k-marks")...)
		require.Equal(t, 0, code, stderr)
		outs[mode] = stdout
		require.Regexp(t, `(?m)^\s+#\s+KIND\s+START\s+WROTE\s+RESENT\s+STATUS\s+REFUSED\s+REPLAYED\s+ERROR\s+RETRY-AFTER\s+DURATION$`, stdout, mode)
		require.Regexp(t, `(?m)^\s+1\s+submit\s+2026-11-30T09:00:00.000Z\s+yes\s+yes\s+-\s+no\s+no\s+net/http: timeout awaiting response headers\s+-\s+30s$`, stdout, mode)
		require.Regexp(t, `(?m)^\s+2\s+submit\s+2026-11-30T09:01:00.000Z\s+yes\s+no\s+409\s+yes\s+no\s+idempotency_request_in_progress\s+1s\s+40ms$`, stdout, mode)
		require.Regexp(t, `(?m)^\s+3\s+submit\s+2026-11-30T09:02:00.000Z\s+yes\s+no\s+201\s+no\s+yes\s+-\s+-\s+50ms$`, stdout, mode)
		require.Regexp(t, `(?m)^  replayed:\s+yes$`, stdout, mode)
		require.Regexp(t, `(?m)^confirmation \(conflicted\): whop-webhook event evt_3 at 2026-11-30T10:00:00.000Z: succeeded pay_9 payment.succeeded \(status 201\); the key was held by another request$`, stdout, mode)
	}
	require.Equal(t, withoutBodies(outs["-journal"]), withoutBodies(outs["-url"]))
}

// TestShowJSONAttemptMarks: show -json carried none of the marks either.
func TestShowJSONAttemptMarks(t *testing.T) {
	path, _ := markedRecord(t)
	for _, mode := range []string{"-journal", "-url"} {
		args := []string{"-journal", path}
		if mode == "-url" {
			args = []string{"-url", serveJournal(t, path)}
		}
		stdout, stderr, code := runIdem(t, append(args, "show", "-json", "k-marks")...)
		require.Equal(t, 0, code, stderr)
		type marks struct {
			Number                    int
			Resent, Refused, Replayed bool
		}
		var got struct {
			Result struct {
				Replayed bool `json:"replayed"`
			} `json:"result"`
			Attempts []marks `json:"attempts"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
		require.True(t, got.Result.Replayed, mode)
		require.Equal(t, []marks{{Number: 1, Resent: true}, {Number: 2, Refused: true}, {Number: 3, Replayed: true}}, got.Attempts, mode)
		var raw struct {
			Attempts []map[string]any `json:"attempts"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &raw))
		require.Equal(t, false, raw.Attempts[0]["refused"], "%s: refused is printed when false too", mode)
		require.Equal(t, false, raw.Attempts[0]["replayed"], mode)
	}
}
