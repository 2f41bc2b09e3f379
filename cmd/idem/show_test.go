package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

func TestShow(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "-journal", f.path, "show", "k-unknown")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"key:        k-unknown\n",
		"scope:      default\n",
		"ref:        order-7\n",
		"state:      unknown\n",
		"review:     key expired\n",
		"request:    POST https://api.example.com/v1/orders\n",
		"result url: https://api.example.com/v1/operations/k-unknown\n",
		"header:\n  Authorization: [redacted]\n  Content-Type: application/json\n",
		"  " + orderBody + "\n",
		"attempts:\n",
	} {
		require.Contains(t, stdout, want)
	}
	require.Regexp(t, regexp.MustCompile(fmt.Sprintf(`body: %d bytes, sha256 [0-9a-f]{64}, as text:`, len(orderBody))), stdout)
	require.NotContains(t, stdout, secretToken)
	require.Regexp(t, `(?m)^\s+#\s+KIND\s+START\s+WROTE\s+RESENT\s+STATUS\s+REFUSED\s+REPLAYED\s+ERROR\s+RETRY-AFTER\s+DURATION$`, stdout)
	require.Regexp(t, `(?m)^\s+1\s+submit\s+\S+\s+yes\s+no\s+503\s+no\s+no\s+-\s+2s\s+120ms$`, stdout)
	require.Regexp(t, `(?m)^\s+2\s+query\s+\S+\s+yes\s+no\s+-\s+no\s+no\s+read tcp: i/o timeout\s+-\s+10s$`, stdout)
}

func TestShowAttemptWithoutOutcome(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "show", "-journal", f.path, "k-pending")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^\s+1\s+submit\s+\S+\s+yes\s+-\s+\?\s+-\s+-\s+no outcome recorded \(maybe sent\)\s+-\s+-$`, stdout)
	require.Contains(t, stdout, "header:\n  Content-Type: application/json\n  X-Request-Source: checkout\n")
}

func TestShowResult(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "show", "-journal", f.path, "k-succeeded")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^settled:\s+\d{4}-\d\d-\d\dT`, stdout)
	require.Regexp(t, `(?m)^  resource id:\s+ord_1$`, stdout)
	require.Regexp(t, `(?m)^  status:\s+201$`, stdout)
	require.Contains(t, stdout, "  body: 14 bytes, as text:\n    {\"id\":\"ord_1\"}\n")
	require.Contains(t, stdout, "attempts: none\n")
}

func TestShowBinaryBody(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "show", "-journal", f.path, "k-binary")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "as base64:\n  "+base64.StdEncoding.EncodeToString(binaryBody)+"\n")
	require.NotContains(t, stdout, "\x1b", "a control character reached the terminal")

	stdout, stderr, code = runIdem(t, "show", "-journal", f.path, "k-binary", "-json")
	require.Equal(t, 0, code, stderr)
	var got struct {
		Body       *string `json:"body"`
		BodyBase64 string  `json:"body_base64"`
		BodySize   int     `json:"body_size"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	require.Nil(t, got.Body)
	require.Equal(t, base64.StdEncoding.EncodeToString(binaryBody), got.BodyBase64)
	require.Equal(t, len(binaryBody), got.BodySize)
}

func TestShowJSON(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "show", "-journal", f.path, "-json", "k-unknown")
	require.Equal(t, 0, code, stderr)
	var got struct {
		Key, Scope, Ref, State, Review, Method, URL, Body string
		BodySHA256                                        string `json:"body_sha256"`
		Header                                            map[string][]string
		Attempts                                          []struct {
			Number     int
			Kind       string
			Wrote      bool
			Done       bool
			Status     int
			Error      string
			RetryAfter string `json:"retry_after"`
			Duration   string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, "k-unknown", got.Key)
	require.Equal(t, orderBody, got.Body)
	require.Len(t, got.BodySHA256, 64)
	require.Equal(t, []string{"application/json"}, got.Header["Content-Type"])
	require.Equal(t, []string{"[redacted]"}, got.Header["Authorization"])
	require.NotContains(t, stdout, secretToken)
	require.Len(t, got.Attempts, 2)
	require.Equal(t, 503, got.Attempts[0].Status)
	require.Equal(t, "2s", got.Attempts[0].RetryAfter)
	require.Equal(t, "query", got.Attempts[1].Kind)
	require.Equal(t, "read tcp: i/o timeout", got.Attempts[1].Error)
}

func TestShowScope(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "show", "-journal", f.path, "-scope", "acct-2", "k-other")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "state:      processing\n")

	// In the default scope it is not there, and the error says where it is.
	stdout, stderr, code = runIdem(t, "show", "-journal", f.path, "k-other")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "idem: no operation with key \"k-other\" in scope \"default\"; list them with `idem list` (the key exists in scope \"acct-2\": pass -scope)\n", stderr)
}

func TestShowUnknownKey(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "show", "-journal", f.path, "nope")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "idem: no operation with key \"nope\" in scope \"default\"; list them with `idem list`\n", stderr)
}

func TestShowKeyAfterDoubleDash(t *testing.T) {
	f := newJournal(t)
	_, stderr, code := runIdem(t, "show", "-journal", f.path, "--", "-json")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no operation with key "-json" in scope "default"`)
}

// TestShowNextDueOnlyWhileOpen: a settled operation is never due again, so
// show prints when it settled and no "next due" (the journal keeps the
// NextDue a record had when it settled, and show printed it); an open one
// the reverse. show -json leaves next_due out for a settled one too.
func TestShowNextDueOnlyWhileOpen(t *testing.T) {
	f := newJournal(t)
	s, err := journal.Open(f.path)
	require.NoError(t, err)
	ctx := context.Background()
	due := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"amount":9}`)
	for _, key := range []string{"k-due", "k-settled"} {
		_, err = s.Create(ctx, &journal.Record{
			Scope: "default", Key: key, Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown,
			Created: due.Add(-time.Hour), Updated: due.Add(-time.Hour), NextDue: due,
		})
		require.NoError(t, err)
	}
	settled, err := s.Update(ctx, "default", "k-settled", func(r *journal.Record) error {
		r.State, r.Settled, r.Updated = journal.StateSucceeded, due.Add(time.Minute), due.Add(time.Minute)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, due, settled.NextDue.UTC(), "the journal keeps NextDue: show must not print it")
	require.NoError(t, s.Close())

	stdout, stderr, code := runIdem(t, "show", "-journal", f.path, "k-settled")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stdout, "next due")
	require.Regexp(t, `(?m)^settled:\s+2026-05-01T09:01:00.000Z$`, stdout)

	stdout, stderr, code = runIdem(t, "show", "-journal", f.path, "k-due")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^next due:\s+2026-05-01T09:00:00.000Z$`, stdout)
	require.NotContains(t, stdout, "settled:")

	stdout, stderr, code = runIdem(t, "show", "-json", "-journal", f.path, "k-settled")
	require.Equal(t, 0, code, stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.NotContains(t, got, "next_due")
	require.Equal(t, "2026-05-01T09:01:00Z", got["settled"])
}
