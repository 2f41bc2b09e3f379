package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// makeNewer makes the record of key in scope "default" one written by a
// newer idem, as a rollback leaves it: its record version byte above this
// build's.
func makeNewer(t *testing.T, path, key string) {
	t.Helper()
	journaltest.MakeNewer(t, path, "default", key)
}

// TestStatsAndCheckCountRecordsFromNewerIdem: after a rollback, idem
// stats failed with ErrVersion on the first record a newer idem wrote, so
// the operator saw no counts at all, and idem check called the journal
// damaged (stray index entries) and said to keep a copy of it. Both count
// such records apart (their state is unreadable), with what that means
// (idem list leaves them out: TestListDuringRollback).
func TestStatsAndCheckCountRecordsFromNewerIdem(t *testing.T) {
	f := newJournal(t)
	makeNewer(t, f.path, "k-pending")
	makeNewer(t, f.path, "k-binary")

	stdout, stderr, code := runIdem(t, "stats", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^  by a newer idem\s+2$`, stdout)
	require.Regexp(t, `(?m)^  total\s+6$`, stdout)
	require.Regexp(t, `(?m)^  pending\s+0$`, stdout)
	require.Contains(t, stdout, "idem was rolled back")

	stdout, stderr, code = runIdem(t, "stats", "-journal", f.path, "-json")
	require.Equal(t, 0, code, stderr)
	var got struct {
		Newer int `json:"newer_records"`
		Total int `json:"total"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, 2, got.Newer)
	require.Equal(t, 6, got.Total)

	stdout, stderr, code = runIdem(t, "check", "-journal", f.path)
	require.Equal(t, 0, code, "not damage: %s", stderr)
	require.Contains(t, stdout, "of which 2 written by a newer idem")
	stdout, stderr, code = runIdem(t, "check", "-journal", f.path, "-json")
	require.Equal(t, 0, code, stderr)
	got.Newer = 0
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, 2, got.Newer)

	// Compact checks its copy as check does: it keeps them.
	_, stderr, code = runIdem(t, "compact", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	stdout, stderr, code = runIdem(t, "check", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "of which 2 written by a newer idem")

}

// TestListDuringRollback: after a rollback, idem list failed with
// ErrVersion on any record a newer idem wrote, settled ones included (and
// Prune keeps those until the upgrade), so the runbook's idem list -review
// showed nothing for as long as the rollback lasted, this build's own
// flagged operations included; so did the admin handler's /operations
// that idem -url lists through. The list leaves them out and says so on
// stderr, stdout staying the list (one JSON value with -json), counted by
// /stats (newer_records), which counts the open ones apart
// (newer_open_records): they fall to zero once they are settled. A page
// does not count them: that would read the whole journal per page.
func TestListDuringRollback(t *testing.T) {
	f := newJournal(t)
	makeNewer(t, f.path, "k-pending") // open
	makeNewer(t, f.path, "k-binary")  // settled
	const note = "idem: 2 records written by a newer idem are not listed (1 of them open; idem stats)"

	stdout, stderr, code := runIdem(t, "list", "-review", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^k-unknown\s+default\s+unknown\s`, stdout, "this build's flagged operation")
	require.Equal(t, 2, strings.Count(stdout, "\n"), "heading and one operation: %s", stdout)
	require.Contains(t, stderr, note)

	stdout, stderr, code = runIdem(t, "list", "-json", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	var recs []struct {
		Key string `json:"key"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &recs), stdout)
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	require.ElementsMatch(t, []string{"k-unknown", "k-succeeded", "k-failed", "k-other"}, keys)
	require.Contains(t, stderr, note)

	stdout, stderr, code = runIdem(t, "stats", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^  by a newer idem\s+2$`, stdout)
	require.Regexp(t, `(?m)^    of them open\s+1$`, stdout)

	url := serveJournal(t, f.path)
	stdout, stderr, code = runIdem(t, "-url", url, "list", "-review")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^k-unknown\s+default\s+unknown\s`, stdout)
	require.Equal(t, 2, strings.Count(stdout, "\n"), stdout)
	require.Contains(t, stderr, note)

	var page struct {
		Operations []struct {
			Key string `json:"key"`
		} `json:"operations"`
		Next  string `json:"next"`
		Newer *int   `json:"newer_records"`
	}
	getJSON(t, url+"operations?flagged=true", &page)
	require.Len(t, page.Operations, 1)
	require.Equal(t, "k-unknown", page.Operations[0].Key)
	require.Empty(t, page.Next)
	require.Nil(t, page.Newer, "a page does not count them")
	// Pages of one: the records left out take no place in a page, and no
	// page made of them alone ends the listing.
	var paged []string
	for cursor := ""; ; {
		page.Operations, page.Next = nil, ""
		getJSON(t, url+"operations?limit=1&cursor="+cursor, &page)
		for _, op := range page.Operations {
			paged = append(paged, op.Key)
		}
		if page.Next == "" {
			break
		}
		require.Less(t, len(paged), 10, "paging ends")
		cursor = page.Next
	}
	require.Equal(t, []string{"k-other", "k-failed", "k-succeeded", "k-unknown"}, paged)

	var st struct {
		Newer     int `json:"newer_records"`
		NewerOpen int `json:"newer_open_records"`
	}
	getJSON(t, url+"stats", &st)
	require.Equal(t, 2, st.Newer)
	require.Equal(t, 1, st.NewerOpen)
}

// getJSON decodes the JSON answer of a GET of url into out.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
}

// TestCheckNamesRecordsFromNewerIdem: since List leaves out the records a
// newer idem wrote, no command of this build named one any more (idem
// list's error had named the first), so an operator could count them but
// not find them. Nothing tells such a record from one whose version byte
// was damaged (a bit flip on a disk: records carry no checksum, and
// bbolt checks only its pages' structure), and on a journal no newer idem
// ever wrote that is a flagged payment gone from list -review. idem check,
// which reads every record, names them, in (scope, key) order.
func TestCheckNamesRecordsFromNewerIdem(t *testing.T) {
	f := newJournal(t)
	makeNewer(t, f.path, "k-pending")
	// A bit flip of the version byte's top bit reads as a newer version.
	journaltest.SetRecordByte(t, f.path, "default", "k-binary", 2, journal.RecordVersion|0x80)

	stdout, stderr, code := runIdem(t, "check", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "of which 2 written by a newer idem")
	require.Regexp(t, `(?m)^    default/k-binary\n    default/k-pending$`, stdout)

	stdout, stderr, code = runIdem(t, "check", "-journal", f.path, "-json")
	require.Equal(t, 0, code, stderr)
	var got struct {
		Newer     int `json:"newer_records"`
		NewerKeys []struct {
			Scope string `json:"scope"`
			Key   string `json:"key"`
		} `json:"newer_keys"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, 2, got.Newer)
	require.Len(t, got.NewerKeys, 2, stdout)
	require.Equal(t, "k-binary", got.NewerKeys[0].Key)
	require.Equal(t, "k-pending", got.NewerKeys[1].Key)
	require.Equal(t, "default", got.NewerKeys[1].Scope)
}

// TestListWhenStatsFails: idem -url list reads /stats only for its note on
// the records a newer idem wrote; a /stats that fails (a proxy's 502, a
// handler whose journal read fails) costs the note, never the list the
// operator asked for, nor its exit status, nor -json's stdout.
func TestListWhenStatsFails(t *testing.T) {
	f := newJournal(t)
	makeNewer(t, f.path, "k-pending")
	c, err := idem.Open(f.path)
	require.NoError(t, err)
	defer c.Close()
	statsCalls := 0
	h := http.StripPrefix("/idem", admin.NewHandler(c))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stats") {
			statsCalls++
			http.Error(w, "bad gateway", http.StatusBadGateway) // as a reverse proxy answers
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	stdout, stderr, code := runIdem(t, "-url", srv.URL+"/idem/", "list", "-review")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^k-unknown\s+default\s+unknown\s`, stdout)
	require.NotContains(t, stderr, "not listed")
	require.Equal(t, 1, statsCalls)

	stdout, stderr, code = runIdem(t, "-url", srv.URL+"/idem/", "list", "-json")
	require.Equal(t, 0, code, stderr)
	var recs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &recs), stdout)
	require.Len(t, recs, 5)
	require.Equal(t, 2, statsCalls)
}
