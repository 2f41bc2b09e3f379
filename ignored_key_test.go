package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Solidgate's endpoints differ in whether they de-duplicate by
// Idempotency-Key, and an answer says which: "Idempotency-Status:
// ignored" when the endpoint does not
// (https://api-docs.solidgate.com/api/v2/idempotent-requests). After an
// answer that leaves open whether the request executed, a resend with the
// same key is then a second request: it may charge again. The operation
// goes to a person instead, and stays there: not Resume, not the
// reconciler, not an explicit Do resends it.
func TestIgnoredKeyIsNeverResentAfterMaybeExecuted(t *testing.T) {
	ignored := http.Header{"Idempotency-Status": {"ignored"}}
	charged := shape{status: http.StatusCreated, body: `{"id":"pay_2","status":"settled"}`}
	for _, tt := range []struct {
		name  string
		first shape
	}{
		{"500", shape{status: http.StatusInternalServerError, header: ignored, body: `{"error":{"code":"5.01","message":"internal error"}}`}},
		{"503", shape{status: http.StatusServiceUnavailable, header: ignored, body: `{"error":{"code":"5.02","message":"service unavailable"}}`}},
		{"200 that does not decode", shape{status: http.StatusOK, header: ignored, body: `{"order":{"status":"processing"}}`}},
		{"202 still running", shape{status: http.StatusAccepted, header: ignored, body: `{"id":"pay_1","status":"processing"}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.first, charged)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			req := idem.Request{Key: "k", URL: v.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)}
			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			v.requireKeys(t, "Idempotency-Key", "k", 1)

			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, 1, sum.Review)
			requireDoSendsNothing(t, c, v, idem.ErrNeedsReview, "Idempotency-Key", 1)
		})
	}

	// An answer that says this request did not execute (429) leaves
	// nothing to duplicate: resent at once, as any throttled request.
	t.Run("429: resent", func(t *testing.T) {
		v := newVendor(t, shape{status: http.StatusTooManyRequests, header: ignored}, charged)
		res, err := v.submit(t)
		require.NoError(t, err)
		require.Equal(t, "pay_2", res.ResourceID)
		v.requireKeys(t, "Idempotency-Key", "k", 2)
	})
}

// Solidgate's endpoints that do not de-duplicate by the key say so in
// their answers, "Idempotency-Status: ignored"
// (https://api-docs.solidgate.com/api/v2/idempotent-requests). A 429 so
// marked leaves the request to be resent; once that resend's answer is
// lost it may have charged, and the server has already said it would
// take another resend for a new payment. Not idem, nor net/http on its
// own (it resends a request with an Idempotency-Key header when a reused
// connection dies after writing it), nor Resume after a restart resends.
func TestIgnoredKeyRefusalThenLostAnswerIsNeverResent(t *testing.T) {
	var (
		mu      sync.Mutex
		submits int
		charges int
		keys    []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		submits++
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := submits
		if n > 1 {
			charges++ // the key is ignored: every request that gets through charges
		}
		mu.Unlock()
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		switch n {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"code":"0.01","message":"too many requests"}}`)
		case 2:
			// Charged, then the connection drops before the answer.
			dropConnection(w)
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"pay_2","status":"settled"}`)
		}
	}))
	t.Cleanup(srv.Close)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	clock := idemtest.NewClock(epoch)
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock))
	require.NoError(t, err)
	req := idem.Request{Key: "k", URL: srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)}
	res, err := c.Submit(t.Context(), req)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	require.Equal(t, 2, res.Attempts)
	require.NoError(t, c.Close())

	c, err = idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	mu.Lock()
	require.Equal(t, []string{"k", "k"}, keys, "submits and their keys: net/http sent none again on its own")
	require.Equal(t, 1, charges, "charges")
	mu.Unlock()
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewKeyIgnored, rec.Review)
}

// ignoringAPI is a payment endpoint of a server that does not
// de-duplicate by the key, and says so in every answer it sends
// (Solidgate's "Idempotency-Status: ignored", as above): every request
// that reaches it charges.
type ignoringAPI struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []string // each request's Idempotency-Key
	drop    int      // the request (1-based) whose answer is lost after it charged
	charged int
	onLost  func() // if set, called as that answer is lost
}

func newIgnoringAPI(t testing.TB) *ignoringAPI {
	t.Helper()
	s := &ignoringAPI{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.charged++
		n, lost, onLost := s.charged, len(s.keys) == s.drop, s.onLost
		s.mu.Unlock()
		if lost {
			if onLost != nil {
				onLost()
			}
			dropConnection(w)
			return
		}
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled"}`, n)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// loseNext makes the next request charge and lose its answer.
func (s *ignoringAPI) loseNext() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop = len(s.keys) + 1
}

// submitLost submits a payment whose answer is lost after it charged,
// its caller giving up waiting as it is lost (the operation is left
// unknown, not resent).
func (s *ignoringAPI) submitLost(t testing.TB, c *idem.Client, key, url, body string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.mu.Lock()
	s.onLost = cancel
	s.mu.Unlock()
	s.loseNext()
	_, err := c.Submit(ctx, idem.Request{Key: key, URL: url, Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	s.mu.Lock()
	s.onLost = nil
	s.mu.Unlock()
}

// requireSeen asserts the requests received, by key, and the charges.
func (s *ignoringAPI) requireSeen(t testing.TB, keys ...string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, keys, s.keys, "requests by key")
	require.Equal(t, len(keys), s.charged, "charges")
}

// On an endpoint that ignores the key, a copy of the request that may
// have executed before the one that settles the operation may have
// charged too: net/http's own resend on a fresh connection after a
// reused one died once it was written, or idem's resend after an answer
// that told nothing. The answer that settles it says the key is ignored:
// the payment it names is real, and so may be another. Settled, and
// flagged for a person.
func TestIgnoredKeySettledAfterMaybeExecutedIsFlagged(t *testing.T) {
	s := newIgnoringAPI(t)
	var settled, flagged []string
	c := clientFor(t, s.srv, idemtest.NewClock(epoch), idem.WithHooks(idem.Hooks{
		Settle: func(_ context.Context, res *idem.Result) { settled = append(settled, res.Key) },
		Review: func(_ context.Context, res *idem.Result) { flagged = append(flagged, res.Key) },
	}))
	// A request to another endpoint of the host leaves a connection to
	// reuse, and says nothing about this one.
	_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/refund", Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	s.loseNext()

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "pay_3", res.ResourceID)
	s.requireSeen(t, "k0", "k", "k")
	require.Equal(t, idem.ReviewMaybeTwice, res.Review)
	list, err := c.List(t.Context(), idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "k", list[0].Key)
	require.Equal(t, []string{"k0", "k"}, settled, "Settle hook")
	require.Equal(t, []string{"k"}, flagged, "Review hook")
}

// Whether an endpoint de-duplicates by the key is the endpoint's
// (Solidgate: "Idempotency support varies by endpoint"). Once one payment's
// answer said this one does not, another payment to it whose answer is
// lost may have charged, though no answer of its own said anything: not
// net/http on its reused connection, nor idem, nor Resume sends it again.
func TestIgnoredKeyEndpointIsRemembered(t *testing.T) {
	s := newIgnoringAPI(t)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	s.loseNext()

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	s.requireSeen(t, "k0", "k")
}

// The endpoint may be learnt to ignore the key after a payment's answer to
// it was lost (Solidgate: "Idempotency support varies by endpoint", and
// says so with "Idempotency-Status: ignored"): the caller's context ended
// while that payment was on the wire, then another payment's answer said
// the endpoint ignores the key. The first may have charged; resent by
// Resume, it would charge again.
func TestIgnoredKeyEndpointLearntAfterLostAnswerIsNeverResent(t *testing.T) {
	s := newIgnoringAPI(t)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.onLost = cancel // the caller stops waiting as the answer is lost
	s.loseNext()
	_, err := c.Submit(ctx, idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	_, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":5}`)})
	require.NoError(t, err)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	s.requireSeen(t, "k", "k2")
	require.Equal(t, 1, sum.Review)
	s.requireSeen(t, "k", "k2")
	list, err := c.List(t.Context(), idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "k", list[0].Key)
	require.Equal(t, idem.ReviewKeyIgnored, list[0].Review)
}

// What a Client learns of an endpoint that ignores the key lives as long
// as the process; the operations it flagged for it stay in the journal.
// After a restart, Resume (or Run, with the operations it claims) learns
// the endpoint again from them before it visits anything: a payment to it whose answer was lost (its caller
// stopped waiting) may have charged, and is not sent again. Nor does the
// caller's own Do, retrying with the same key as told (before Resume, or
// while Run's first pass has yet to read the journal): the first resend
// of something that may have executed reads them first. It resent the
// payment: charged twice.
func TestIgnoredKeyEndpointRelearntAfterRestart(t *testing.T) {
	for _, by := range []string{"Resume", "Run", "Do"} {
		t.Run(by, func(t *testing.T) { testIgnoredKeyEndpointRelearnt(t, by) })
	}
}

func testIgnoredKeyEndpointRelearnt(t *testing.T, by string) {
	s := newIgnoringAPI(t)
	path := filepath.Join(t.TempDir(), "idem.journal")
	var store *journal.Store
	open := func() *idem.Client {
		var err error
		store, err = journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
		require.NoError(t, err)
		st := store
		t.Cleanup(func() { _ = c.Close(); _ = st.Close() })
		return c
	}
	charge := s.srv.URL + "/api/v1/charge"
	c := open()
	ctx, cancel := context.WithCancel(t.Context())
	s.onLost = cancel // the caller stops waiting as the answer is lost
	s.loseNext()
	_, err := c.Submit(ctx, idem.Request{Key: "a", URL: charge, Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	s.onLost = nil
	_, err = c.Submit(t.Context(), idem.Request{Key: "k0", URL: charge, Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	s.loseNext()
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: charge, Body: []byte(`{"amount":5}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())
	s.requireSeen(t, "a", "k0", "k")

	// A restart: a new process, the same journal, started by Resume or
	// straight into Run, or whose caller retries at once.
	c = open()
	switch by {
	case "Do":
		_, err := c.Do(t.Context(), &idem.Operation{Key: "a"})
		require.ErrorIs(t, err, idem.ErrNeedsReview)
	case "Run":
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		ran := make(chan struct{})
		go func() { _ = c.Run(ctx); close(ran) }()
		require.Eventually(t, func() bool {
			op, err := c.Lookup(t.Context(), "", "a")
			return err == nil && op.Review != ""
		}, 15*time.Second, time.Millisecond)
		cancel()
		<-ran
	default:
		sum, err := c.Resume(t.Context())
		require.NoError(t, err)
		require.Equal(t, 2, sum.Review)
	}
	s.requireSeen(t, "a", "k0", "k")
	op, err := c.Lookup(t.Context(), "", "a")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review)
}
