package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// tokenGuarded is a resource updated under HTTP optimistic concurrency
// control, as Banking Circle's changeable resources are
// (https://docs.bankingcircleconnect.com/guides/concurrency-handling: a
// PUT or DELETE carries the resource's concurrency token in If-Match,
// and "If the resource state has changed, 412 - Precondition Failed
// will be returned"; Twilio's error 20412 and Billwerk+'s conditional
// requests answer so too; its error body is modelled on Banking
// Circle's other refusals). Each update applied issues a new token, so a
// copy of an update that applied is refused 412 for the token its
// original moved. The key is not checked before the token (modelled).
// lose answers the first update applied as Envoy does a reset before
// headers (podReset). Its result endpoint (modelled) finds an update by
// the Idempotency-Key it applied under.
type tokenGuarded struct {
	mu      sync.Mutex
	token   int
	lose    bool
	applied int
	keys    []string // the key of each update applied
	puts    []http.Header
	queries int
}

func (s *tokenGuarded) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if key, ok := strings.CutPrefix(r.URL.Path, "/api/v1/payments/by-key/"); ok {
		s.queries++
		if !slices.Contains(s.keys, key) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":404,"message":"No update with this key."}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"pay_1","status":"Approved"}`)
		return
	}
	s.puts = append(s.puts, r.Header.Clone())
	if r.Header.Get("If-Match") != fmt.Sprintf(`"%d"`, s.token) {
		w.WriteHeader(http.StatusPreconditionFailed)
		_, _ = io.WriteString(w, `{"error":{"id":"9b1e7c2d","code":412,"message":"The resource state has changed.","details":[]}}`)
		return
	}
	s.token++
	s.applied++
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	if s.lose {
		s.lose = false
		podReset(w)
		return
	}
	w.Header().Set("ETag", fmt.Sprintf(`"%d"`, s.token))
	_, _ = io.WriteString(w, `{"id":"pay_1","status":"Approved"}`)
}

// updateRequest is the update of pay_1 built on token 1, with If-Match
// unless bare.
func updateRequest(url string, bare bool) idem.Request {
	h := http.Header{"If-Match": {`"1"`}}
	if bare {
		h = nil
	}
	return idem.Request{Key: "k", Method: http.MethodPut, URL: url + "/api/v1/payments/pay_1", Header: h,
		Body: []byte(`{"amount":{"currency":"EUR","amount":125.00}}`)}
}

// Behind the client's own sidecar the update applies and its answer is
// lost as a 503 reset before headers, which the sidecar retries (Istio's
// default retry_on): the copy is refused 412 for the token the first
// copy moved, the only answer idem sees, to its first attempt. Read as
// failed, the caller, as 412's docs advise, fetches the new token and
// updates again: applied twice. One update applied; never failed, left
// for a person (whether the resource holds the update).
func TestPreconditionFailedBehindARetryingMeshIsNoFailure(t *testing.T) {
	s := &tokenGuarded{token: 1, lose: true}
	sidecar := retryingSidecar(t, s.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), updateRequest(sidecar.URL, false))
	requireVersionRefusalForAPerson(t, c, res, err, "The resource state has changed")
	s.requireOurCopyApplied(t)
}

// requireOurCopyApplied asserts that s applied one update, ours, and got
// two PUTs, ours and the sidecar's copy, both under key k and on token
// 1: nothing resent.
func (s *tokenGuarded) requireOurCopyApplied(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 1, s.applied, "updates applied")
	require.Len(t, s.puts, 2, "ours and the sidecar's copy, nothing resent")
	for _, h := range s.puts {
		require.Equal(t, "k", h.Get("Idempotency-Key"))
		require.Equal(t, `"1"`, h.Get("If-Match"))
	}
}

// A 412 to a request that carried no precondition is not about a
// version a copy of it moved: a refusal on its merits, failed.
func TestPreconditionFailedWithoutAPreconditionIsAFailure(t *testing.T) {
	s := &tokenGuarded{token: 1}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), updateRequest(srv.URL, true))
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 0, s.applied)
	require.Len(t, s.puts, 1)
}

// requireVersionRefusalForAPerson asserts that the update keyed "k",
// refused at its first attempt for a version moved (res, err), is left
// for a person and never failed: unknown, ReviewRefusedAfterSend, one
// attempt journaled with the server's words, and Resume sends nothing
// and leaves it so.
func requireVersionRefusalForAPerson(t testing.TB, c *idem.Client, res *idem.Result, err error, words string) {
	t.Helper()
	require.NotErrorIs(t, err, idem.ErrFailed, "an update that may have applied read as failed")
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
	require.Equal(t, 1, res.Attempts)
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewRefusedAfterSend, rec.Review)
	require.True(t, rec.Open())
	require.Len(t, rec.Attempts, 1)
	require.Contains(t, rec.Attempts[0].Err, words, "the server's words, for the person deciding")
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "still for a person: %+v", sum)
}

// A 412 no copy of the request could have caused is a refusal on its
// merits, failed, never left for a person: a GET or HEAD with a stale
// If-Match (a safe method's copy moves no version, RFC 9110 9.2.1), and
// an If-Match of weak tags only, which RFC 9110 13.1.1 compares strongly
// ("An origin server MUST use the strong comparison function when
// comparing entity tags for If-Match"): a compliant server refuses it
// whatever the resource's version, so nothing executed, not even a copy.
func TestPreconditionFailedThatNoCopyCausedIsAFailure(t *testing.T) {
	for name, tt := range map[string]struct {
		method string
		match  []string
	}{
		"GET with a stale If-Match":  {http.MethodGet, []string{`"0"`}},
		"HEAD with a stale If-Match": {http.MethodHead, []string{`"0"`}},
		"PUT with a weak tag":        {http.MethodPut, []string{`W/"1"`}},
		"PUT with weak tags only":    {http.MethodPut, []string{`W/"1", W/"2"`}},
	} {
		t.Run(name, func(t *testing.T) {
			s := &tokenGuarded{token: 1}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch))
			req := updateRequest(srv.URL, false)
			req.Method, req.Header = tt.method, http.Header{"If-Match": tt.match}
			if tt.method != http.MethodPut {
				req.Body = nil
			}
			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.NotErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.StateFailed, res.State)
			require.Empty(t, res.Review)
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 0, s.applied)
			require.Len(t, s.puts, 1, "sent once")
		})
	}
}

// With a result endpoint the 412 to a first attempt is asked about by
// the key, as a create-only request's is: the server checks the token
// before the key (modelled), and keeps the key of each update it applies.
// A copy of ours that a sidecar retried applied: found, succeeded, one
// update. Another writer moved the token: not found once past the read
// path's lag, failed, with the server's words and that the resource
// changed, nothing applied. It was left for a person at once either way.
func TestPreconditionFailedWithAResultEndpointIsAsked(t *testing.T) {
	t.Run("our copy applied", func(t *testing.T) {
		s := &tokenGuarded{token: 1, lose: true}
		sidecar := retryingSidecar(t, s.serve)
		c := clientFor(t, sidecar, idemtest.NewClock(epoch))
		req := updateRequest(sidecar.URL, false)
		req.ResultURL = sidecar.URL + "/api/v1/payments/by-key/k"
		res, err := c.Submit(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "pay_1", res.ResourceID)
		s.mu.Lock()
		defer s.mu.Unlock()
		require.Equal(t, 1, s.applied, "updates applied")
		require.Len(t, s.puts, 2, "ours and the sidecar's copy, nothing resent")
		require.Equal(t, 1, s.queries)
	})
	t.Run("another writer moved the token", func(t *testing.T) {
		s := &tokenGuarded{token: 2}
		srv := httptest.NewServer(http.HandlerFunc(s.serve))
		t.Cleanup(srv.Close)
		clock := idemtest.NewClock(epoch)
		c := clientFor(t, srv, clock)
		req := updateRequest(srv.URL, false)
		req.ResultURL = srv.URL + "/api/v1/payments/by-key/k"
		res, err := c.Submit(t.Context(), req)
		requireFailedPastTheLag(t, c, clock, res, err, "The resource state has changed", "changed since the update was built")
		_, err = c.Resume(t.Context())
		require.NoError(t, err)
		s.mu.Lock()
		defer s.mu.Unlock()
		require.Equal(t, 0, s.applied)
		require.Len(t, s.puts, 1, "never resent")
		require.Equal(t, 2, s.queries, "in the call, and past the lag")
	})
}
