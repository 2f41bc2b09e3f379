package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

func TestListTable(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "list", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 7, "header and six operations:\n%s", stdout)
	require.Equal(t, []string{"KEY", "SCOPE", "STATE", "ATTEMPTS", "AGE", "REF", "RESOURCE", "REASON"}, strings.Fields(lines[0]))
	// Oldest first.
	require.Equal(t, []string{"k-succeeded", "default", "succeeded", "0", "60d0h", "-", "ord_1", "-"}, strings.Fields(lines[1]))
	require.True(t, strings.HasPrefix(lines[3], "k-unknown "), "line 3 = %q", lines[3])
	require.True(t, strings.HasSuffix(lines[3], "  key expired"), "the review reason, line 3 = %q", lines[3])
	require.Contains(t, lines[3], "order-7")
	require.True(t, strings.HasPrefix(lines[4], "k-failed "), "line 4 = %q", lines[4])
	require.True(t, strings.HasSuffix(lines[4], "  card declined"), "the failure reason, line 4 = %q", lines[4])
	require.True(t, strings.HasPrefix(lines[6], "k-other "), "line 6 = %q", lines[6])
	require.Contains(t, lines[6], "pay_5")
}

func TestListEmpty(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "list", "-journal", f.path, "-state", "pending", "-scope", "acct-2")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "no operations match")

	stdout, _, code = runIdem(t, "list", "-journal", f.path, "-state", "pending", "-scope", "acct-2", "-json")
	require.Equal(t, 0, code)
	require.Equal(t, "[]\n", stdout)
}

func TestListFilters(t *testing.T) {
	f := newJournal(t)
	tests := []struct {
		name string
		args []string
		want []string // scope/key, oldest first
	}{
		{"all", nil, []string{"default/k-succeeded", "default/k-binary", "default/k-unknown", "default/k-failed", "default/k-pending", "acct-2/k-other"}},
		{"state", []string{"-state", "unknown"}, []string{"default/k-unknown"}},
		{"terminal states", []string{"-state", "succeeded,failed"}, []string{"default/k-succeeded", "default/k-binary", "default/k-failed"}},
		{"repeated state", []string{"-state", "pending", "-state", "processing"}, []string{"default/k-pending", "acct-2/k-other"}},
		{"open", []string{"-open"}, []string{"default/k-unknown", "default/k-pending", "acct-2/k-other"}},
		{"review", []string{"-review"}, []string{"default/k-unknown"}},
		{"older than", []string{"-older-than", "24h"}, []string{"default/k-succeeded", "default/k-binary", "default/k-unknown"}},
		{"older than days", []string{"-older-than", "55d"}, []string{"default/k-succeeded"}},
		{"open and older", []string{"-open", "-older-than", "90m"}, []string{"default/k-unknown"}},
		{"scope", []string{"-scope", "acct-2"}, []string{"acct-2/k-other"}},
		{"limit keeps the oldest", []string{"-limit", "2"}, []string{"default/k-succeeded", "default/k-binary"}},
		{"limit after scope", []string{"-scope", "acct-2", "-limit", "1"}, []string{"acct-2/k-other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-journal", f.path, "list", "-json"}, tt.args...)
			stdout, stderr, code := runIdem(t, args...)
			require.Equal(t, 0, code, stderr)
			var got []struct{ Scope, Key string }
			require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
			keys := []string{}
			for _, r := range got {
				keys = append(keys, r.Scope+"/"+r.Key)
			}
			require.Equal(t, tt.want, keys)
		})
	}
}

func TestListJSONRecord(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "list", "-journal", f.path, "-json", "-review")
	require.Equal(t, 0, code, stderr)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Len(t, got, 1)
	r := got[0]
	require.Equal(t, "k-unknown", r["key"])
	require.Equal(t, "unknown", r["state"])
	require.Equal(t, "key expired", r["review"])
	require.Equal(t, orderBody, r["body"])
	require.Equal(t, "https://api.example.com/v1/operations/k-unknown", r["result_url"])
	require.Len(t, r["attempts"], 2)
	require.NotContains(t, stdout, secretToken)
}

// TestListReasonTruncated: a long reason is cut to reasonWidth characters,
// the cut marked, so that a table row stays one readable line.
func TestListReasonTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payments.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	long := "the server answered 422: " + strings.Repeat("idempotency key reused with another body ", 5)
	body := []byte(`{"amount":1}`)
	now := time.Now()
	_, err = s.Create(context.Background(), &journal.Record{
		Scope: "default", Key: "k-long", Method: "POST", URL: "https://api.example.com/v1/orders",
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StateFailed,
		Result:  &journal.Result{StatusCode: 422, Reason: long},
		Created: now, Updated: now, Settled: now,
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	stdout, stderr, code := runIdem(t, "list", "-journal", path)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 2, stdout)
	want := string([]rune(long)[:reasonWidth-1]) + "…"
	require.True(t, strings.HasSuffix(lines[1], "  "+want), "line = %q; want it to end with %q", lines[1], want)

	stdout, stderr, code = runIdem(t, "show", "-journal", path, "k-long")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, long, "show prints the reason whole")
}
