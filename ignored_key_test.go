package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

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
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
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
