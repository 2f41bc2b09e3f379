package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines(t testing.TB) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := strings.TrimSpace(s.b.String())
	if text == "" {
		return nil // nothing logged
	}
	var out []map[string]any
	for _, l := range strings.Split(text, "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		out = append(out, m)
	}
	return out
}

// TestLogsTellOutcomesApart: an operator reading the log can tell "never
// sent", "response lost" and "accepted/settled" apart, by stable attributes,
// and never sees the credential.
func TestLogsTellOutcomesApart(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var attempts []idem.AttemptEvent
	var settled []*idem.Result
	e := newEnv(t, script(step{err: dialRefused}), clientOpts(idem.WithLogger(logger), idem.WithHooks(idem.Hooks{
		Attempt: func(_ context.Context, a idem.AttemptEvent) { attempts = append(attempts, a) },
		Settle:  func(_ context.Context, r *idem.Result) { settled = append(settled, r) },
	})))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	_, err := e.client.Submit(e.ctx, idem.Request{Key: "k", Ref: "draft-9", URL: e.srv.URL + "/orders", Body: []byte(`{}`)})
	require.NoError(t, err)

	var outcomes []string
	for _, l := range buf.lines(t) {
		if l["msg"] != "idem: attempt" {
			continue
		}
		outcomes = append(outcomes, l["outcome"].(string))
		require.Equal(t, "k", l["key"])
		require.Equal(t, idem.DefaultScope, l["scope"])
		require.Equal(t, "draft-9", l["op"])
		require.Contains(t, l, "attempt")
		require.Contains(t, l, "status")
	}
	require.Equal(t, []string{"not_sent", "response_lost", "settled"}, outcomes)
	require.NotContains(t, buf.b.String(), "PLANTED_SECRET")

	require.Len(t, attempts, 3)
	require.False(t, attempts[0].Wrote, "dial refused: never written")
	require.True(t, attempts[1].Wrote, "dropped after commit: written")
	require.True(t, attempts[2].Query)
	require.Equal(t, http.StatusOK, attempts[2].StatusCode)
	require.Len(t, settled, 1)
	require.Equal(t, idem.StateSucceeded, settled[0].State)
}

func TestCustomClassifierAndDecoder(t *testing.T) {
	// An API that answers 404 when a dependency is briefly missing: not a
	// final refusal for us, so treat it as "query, then resend".
	classify := func(code int) idem.Verdict {
		if code == http.StatusNotFound {
			return idem.Ambiguous
		}
		return idem.DefaultClassifier(code)
	}
	var decoded int
	decode := func(a *idem.Answer) (idem.Outcome, error) {
		decoded++
		return idem.DecodeJSON(a)
	}
	e := newEnv(t, script(step{status: http.StatusNotFound}), clientOpts(idem.WithClassifier(classify), idem.WithDecoder(decode)))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, decoded, "the 201 after the resend")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// untracedOnce fails its first round trip the way a transport that is not
// net/http's would: an error, and no httptrace events at all.
type untracedOnce struct {
	base http.RoundTripper
	used bool
}

func (u *untracedOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	if !u.used && req.Method == http.MethodPost {
		u.used = true
		return nil, errors.New("custom transport: connection reset")
	}
	return u.base.RoundTrip(req)
}

// A transport that reports no trace events gets no benefit of the doubt:
// its errors count as "maybe sent", so idem asks before resending.
func TestUntracedTransportErrorIsMaybeSent(t *testing.T) {
	e := newEnv(t)
	c, err := idem.New(e.replica(), append(e.baseOpts(),
		idem.WithHTTPClient(&http.Client{Transport: &untracedOnce{base: e.srv.Client().Transport}}))...)
	require.NoError(t, err)
	res, err := c.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, e.queries("k"), "asked before resending")
	require.Len(t, e.submits("k"), 1)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}
