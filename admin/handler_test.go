package admin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Planted values that must never come back from the handler.
const (
	plantedCredential = "Bearer sk_live_PLANTED_CREDENTIAL"
	plantedBody       = "PLANTED_REQUEST_BODY"
	plantedHeader     = "PLANTED_JOURNALED_HEADER"
	plantedAdminAuth  = "Bearer PLANTED_ADMIN_TOKEN"
)

// fixture is a journal with three operations: "ok" succeeded, "lost"
// unknown (handed off), "old" unknown and flagged, plus the handler.
type fixture struct {
	t      testing.TB
	clock  *idemtest.Clock
	srv    *idemtest.Server
	store  *journal.Store
	client *idem.Client
	admin  *httptest.Server
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: idemtest.NewClock(epoch)}
	srv, store := serverAndJournal(t, f.clock)
	f.srv, f.store = srv, store
	var err error
	f.client, err = idem.New(f.store,
		idem.WithHTTPClient(srv.Client()), idem.WithClock(f.clock),
		idem.WithResultEndpoint(srv.ResultTemplate()), idem.WithMaxAttempts(2), idem.WithReconcile(time.Second, time.Minute, time.Hour),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", plantedCredential)
			return nil
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.client.Close() })

	ctx := context.Background()
	// "old": journaled first, unknown, then flagged by Run past the
	// reconciliation deadline.
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "old", Count: 1000}))
	_, err = f.client.Submit(ctx, f.req("old"))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	f.clock.Advance(2 * time.Hour)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.client.Run(rctx) }()
	res, err := f.client.Wait(rctx, "", "old")
	cancel()
	<-done
	require.NoError(t, err)
	require.Equal(t, idem.ReviewDeadlinePassed, res.Review)

	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "lost", Count: 2}))
	_, err = f.client.Submit(ctx, f.req("lost"))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	_, err = f.client.Submit(ctx, f.req("ok"))
	require.NoError(t, err)
	f.clock.Advance(time.Minute)

	f.admin = httptest.NewServer(admin.NewHandler(f.client, admin.WithClock(f.clock)))
	t.Cleanup(f.admin.Close)
	return f
}

// serverAndJournal starts a fake API on clock and opens a journal, both
// closed when the test ends.
func serverAndJournal(t testing.TB, clock *idemtest.Clock) (*idemtest.Server, *journal.Store) {
	t.Helper()
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	return srv, js
}

func (f *fixture) req(key string) idem.Request {
	return idem.Request{Key: key, URL: f.srv.URL + "/orders", Body: []byte(`{"note":"` + plantedBody + `"}`),
		Header: http.Header{"X-Note": {plantedHeader}}}
}

// get calls the handler and decodes its JSON answer into v (unless nil),
// after checking that nothing planted comes back.
func (f *fixture) do(method, path string, body string, v any) int {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.admin.URL+path, rd)
	require.NoError(f.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", plantedAdminAuth)
	req.Header.Set("Cookie", "session="+plantedAdminAuth)
	req.Header.Set("X-Forwarded-For", plantedAdminAuth)
	resp, err := f.admin.Client().Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	for _, p := range []string{plantedCredential, plantedBody, plantedHeader, plantedAdminAuth, "PLANTED"} {
		require.NotContains(f.t, string(b), p, "%s %s answered with a planted value", method, path)
		for k, vs := range resp.Header {
			require.NotContains(f.t, k+strings.Join(vs, ","), p, "%s %s: header %s", method, path, k)
		}
	}
	require.Equal(f.t, "application/json", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, b)
	if v != nil {
		require.NoError(f.t, json.Unmarshal(b, v), "%s %s: %s", method, path, b)
	}
	return resp.StatusCode
}

func keys(p admin.Page) []string {
	var out []string
	for _, op := range p.Operations {
		out = append(out, op.Key)
	}
	return out
}

func TestList(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"lost", "ok", "old"}},
		{"?state=unknown", []string{"lost", "old"}},
		{"?state=succeeded,failed", []string{"ok"}},
		{"?flagged=true", []string{"old"}},
		{"?older_than=90m", []string{"old"}},
		{"?older_than=90m&state=succeeded", nil},
		{"?scope=default&state=unknown&flagged=true", []string{"old"}},
		{"?scope=nobody", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			var p admin.Page
			require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/operations"+tt.query, "", &p))
			require.Equal(t, tt.want, keys(p))
			require.Empty(t, p.Next)
		})
	}

	t.Run("pages", func(t *testing.T) {
		var got []string
		path := "/operations?limit=1"
		for range 10 {
			var p admin.Page
			require.Equal(t, http.StatusOK, f.do(http.MethodGet, path, "", &p))
			require.Len(t, p.Operations, 1)
			require.Empty(t, p.Operations[0].Timeline, "a list holds no timelines")
			got = append(got, keys(p)...)
			if p.Next == "" {
				break
			}
			path = "/operations?limit=1&cursor=" + p.Next
		}
		require.Equal(t, []string{"lost", "ok", "old"}, got, "every operation exactly once")
	})
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/operations?state=lost", "", 400, "bad_request"},
		{"GET", "/operations?flagged=maybe", "", 400, "bad_request"},
		{"GET", "/operations?older_than=yesterday", "", 400, "bad_request"},
		{"GET", "/operations?older_than=-1h", "", 400, "bad_request"},
		{"GET", "/operations?limit=0", "", 400, "bad_request"},
		{"GET", "/operations?limit=100000", "", 400, "bad_request"},
		{"GET", "/operations?cursor=***", "", 400, "bad_request"},
		{"GET", "/operation?key=nope", "", 404, "not_found"},
		{"GET", "/operation", "", 400, "bad_request"},
		{"GET", "/operation?scope=a%00b&key=k", "", 400, "bad_request"},
		{"POST", "/resolve", `{"key":"a\u0000b","state":"failed","by":"alice","reason":"seen"}`, 400, "bad_request"},
		{"GET", "/nowhere", "", 404, "not_found"},
		{"POST", "/operations", "", 405, "method_not_allowed"},
		{"GET", "/resolve", "", 405, "method_not_allowed"},
		{"POST", "/resolve", `not json`, 400, "bad_request"},
		{"POST", "/resolve", `{"key":"lost","state":"succeeded","reason":"seen"}`, 400, "bad_request"},
		{"POST", "/resolve", `{"key":"lost","state":"succeeded","by":"alice"}`, 400, "bad_request"},
		{"POST", "/resolve", `{"key":"lost","state":"succeeded","by":"alice","reason":"  "}`, 400, "bad_request"},
		{"POST", "/resolve", `{"key":"lost","state":"unknown","by":"alice","reason":"seen"}`, 400, "bad_request"},
		{"POST", "/resolve", `{"key":"lost","state":"failed","by":"alice","reason":"seen","extra":1}`, 400, "bad_request"},
		{"POST", "/resolve", `{"key":"nope","state":"failed","by":"alice","reason":"seen"}`, 404, "not_found"},
		{"POST", "/resolve", `{"key":"ok","state":"failed","by":"alice","reason":"seen"}`, 409, "conflict"},
		// Two resolutions in one body: the first was applied, the second dropped unread.
		{"POST", "/resolve", `{"key":"lost","state":"succeeded","by":"alice","reason":"seen"} {"key":"lost","state":"failed","by":"bob","reason":"seen"}`, 400, "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path+" "+tt.body, func(t *testing.T) {
			var e struct{ Error admin.Error }
			require.Equal(t, tt.status, f.do(tt.method, tt.path, tt.body, &e))
			require.Equal(t, tt.code, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
		})
	}
	// Nothing was changed by a refused resolve.
	for key, want := range map[string]idem.State{"lost": idem.StateUnknown, "ok": idem.StateSucceeded} {
		rec, err := f.store.Get(context.Background(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equal(t, want, rec.State, key)
		require.Nil(t, rec.Resolved, key)
	}
}

func TestShow(t *testing.T) {
	f := newFixture(t)
	var op admin.Operation
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/operation?key=lost", "", &op))
	rec, err := f.store.Get(context.Background(), idem.DefaultScope, "lost")
	require.NoError(t, err)
	require.Equal(t, "unknown", op.State)
	require.Equal(t, 2, op.Attempts)
	require.Len(t, op.Timeline, len(rec.Attempts))
	for i, a := range op.Timeline {
		require.Equal(t, rec.Attempts[i].Number, a.Number)
		require.Equal(t, string(rec.Attempts[i].Kind), a.Kind)
		require.Equal(t, rec.Attempts[i].Status, a.Status)
		require.True(t, rec.Attempts[i].Start.Equal(a.Start))
	}
	require.Equal(t, http.StatusInternalServerError, op.Timeline[0].Status)
	require.Equal(t, f.srv.URL+"/orders", op.URL)

	// The JSON form goes back to the record, bodies and headers aside.
	back := op.Record()
	rec.Body, rec.BodySHA, rec.Header, rec.Trace = nil, [32]byte{}, nil, ""
	require.Equal(t, rec, back)
}

// TestShowRedactsCredentialsInURLs: a record journaled before the client
// refused credentials in URLs (or straight through package journal) was
// shown with its API key.
func TestShowRedactsCredentialsInURLs(t *testing.T) {
	f := newFixture(t)
	body := []byte(`{}`)
	now := f.clock.Now()
	_, err := f.store.Create(context.Background(), &journal.Record{
		Scope: idem.DefaultScope, Key: "legacy", Method: http.MethodPost,
		URL:      f.srv.URL + "/orders?api_key=" + plantedCredential + "&region=eu",
		QueryURL: f.srv.URL + "/orders/legacy?access_token=" + plantedCredential,
		Body:     body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown, Created: now, Updated: now,
	})
	require.NoError(t, err)
	var op admin.Operation
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/operation?key=legacy", "", &op))
	require.Contains(t, op.URL, "region=eu")
	var page admin.Page
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/operations", "", &page))
}

func TestStats(t *testing.T) {
	f := newFixture(t)
	var st admin.Stats
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/stats", "", &st))
	old, err := f.store.Get(context.Background(), idem.DefaultScope, "old")
	require.NoError(t, err)
	age := f.clock.Now().Sub(old.Created).Seconds()
	require.Greater(t, age, (2 * time.Hour).Seconds())
	require.Equal(t, admin.Stats{
		ByState: map[string]int{"unknown": 2, "succeeded": 1}, Open: 2, Review: 1, Total: 3, Complete: true,
		OldestOpenAge: age, OldestUnknownAge: age,
		RetryTokens: st.RetryTokens, RetryTokensMax: idem.DefaultRetryTokens,
		RetryTokensByHost: map[string]float64{strings.TrimPrefix(f.srv.URL, "http://"): st.RetryTokens},
	}, st)
	require.Greater(t, st.RetryTokens, 0.0)
	require.Less(t, st.RetryTokens, idem.DefaultRetryTokens, "the fixture's failed attempts drained its host's budget")
}

func TestHealth(t *testing.T) {
	f := newFixture(t)
	var h admin.Health
	require.Equal(t, http.StatusServiceUnavailable, f.do(http.MethodGet, "/health", "", &h), "Run not running")
	require.False(t, h.OK)
	require.False(t, h.RunActive)
	require.True(t, h.JournalOK)
	require.NotEmpty(t, h.RunError, "the last Run's end")
	require.Equal(t, idem.DefaultRetryTokens, h.RetryTokensMax)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = f.client.Run(ctx) }()
	require.Eventually(t, func() bool { return f.client.Health().RunActive }, 15*time.Second, time.Millisecond)
	h = admin.Health{}
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/health", "", &h))
	require.True(t, h.OK)
	require.True(t, h.RunActive)
	require.Empty(t, h.RunError)
	cancel()
	<-done
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	var ans admin.ResolveAnswer
	body := `{"key":"lost","state":"succeeded","resource_id":"ord_9","reason":"seen in the dashboard","by":"alice"}`
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, &ans))
	require.Equal(t, "unknown", ans.From)
	require.Equal(t, "succeeded", ans.Operation.State)

	rec, err := f.store.Get(context.Background(), idem.DefaultScope, "lost")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.Equal(t, &journal.Resolution{By: "alice", Reason: "seen in the dashboard", At: f.clock.Now(), From: idem.StateUnknown}, rec.Resolved)
	require.Equal(t, "ord_9", rec.Result.ResourceID)

	// A settled operation changes only with force, and is recorded again.
	body = `{"key":"lost","state":"failed","reason":"refunded","by":"bob","force":true}`
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, &ans))
	require.Equal(t, "succeeded", ans.From)
	rec, err = f.store.Get(context.Background(), idem.DefaultScope, "lost")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, rec.State)
	require.Equal(t, "bob", rec.Resolved.By)
	require.Zero(t, bytes.Count([]byte(rec.URL), []byte("PLANTED")))
}
