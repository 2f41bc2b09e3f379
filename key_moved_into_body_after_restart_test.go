package idem_test

import (
	"context"
	"encoding/json"
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

// bodyKeyServer models (modelled, no provider's documentation) an order
// API moving its idempotency key from the Idempotency-Key header into
// the body's client_order_id, and taking both while it does: a request
// that carries either is de-duplicated by it, one that carries neither is
// a new order, as Stripe executes a request sent without its optional
// key (https://docs.stripe.com/api/idempotent_requests). While lose is
// set it drops the connection before answering, a new order committed
// first: every answer is lost.
type bodyKeyServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	lose   bool
	orders int
	held   map[string]string // key → the order's answer
	posts  int
}

func newBodyKeyServer(t *testing.T, clock *idemtest.Clock) *bodyKeyServer {
	t.Helper()
	return newKeyReadingServer(t, clock, movingKey)
}

// newKeyReadingServer is bodyKeyServer reading a request's key with
// keyOf ("" when it carries none).
func newKeyReadingServer(t *testing.T, clock *idemtest.Clock, keyOf func(*http.Request, []byte) string) *bodyKeyServer {
	t.Helper()
	s := &bodyKeyServer{held: map[string]string{}, lose: true}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Date", clock.Now().UTC().Format(http.TimeFormat))
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound) // a restarted client's clock probe (HEAD)
			return
		}
		s.posts++
		key := keyOf(r, body)
		w.Header().Set("Content-Type", "application/json")
		answer, replay := s.held[key]
		if replay && key != "" {
			w.Header().Set("Idempotent-Replayed", "true")
		} else {
			s.orders++
			answer = fmt.Sprintf(`{"id":"ord_%d","status":"succeeded"}`, s.orders)
			if key != "" {
				s.held[key] = answer
			}
		}
		if s.lose {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// movingKey is the key of a request to a server taking it from either
// place while it moves it: the body's client_order_id, else the
// Idempotency-Key header; "" when neither carries one.
func movingKey(r *http.Request, body []byte) string {
	var v struct {
		ClientOrderID string `json:"client_order_id"`
	}
	if json.Unmarshal(body, &v) == nil && v.ClientOrderID != "" {
		return v.ClientOrderID
	}
	return r.Header.Get("Idempotency-Key")
}

// deployKeyInBody opens the journal at path again under the next
// release's settings: base, with the key moved into the body.
func deployKeyInBody(t *testing.T, path string, base []idem.Option) (*journal.Store, *idem.Client) {
	t.Helper()
	st, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	c, err := idem.New(st, append(base, idem.WithKeyInBody())...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return st, c
}

func (s *bodyKeyServer) counts() (orders, posts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orders, s.posts
}

// An order journaled by a release that sent its key in the header, its
// answer lost, is resumed after a deploy that moved the key into the
// body (WithKeyInBody): its journaled body does not carry the key, and
// the new settings send no header, so a resend would carry no key at all
// and the server would take it for a new order. It was resent so: 2
// orders, settled succeeded with the second. Nothing is sent now; the
// operation stays unknown, flagged ReviewKeyNotCarried, and asking
// again (Resume, the caller's Do) sends nothing either.
func TestKeyMovedIntoBodyAfterRestartResendsNoKeylessCopy(t *testing.T) {
	ctx := context.Background()
	clock := idemtest.NewClock(epoch)
	s := newBodyKeyServer(t, clock)
	path := filepath.Join(t.TempDir(), "idem.journal")
	base := []idem.Option{idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock)}

	st, err := journal.Open(path)
	require.NoError(t, err)
	before, err := idem.New(st, base...)
	require.NoError(t, err)
	_, err = before.Submit(ctx, idem.Request{Key: "ord-7f3a9c", URL: s.srv.URL + "/v1/orders", Body: []byte(`{"amount":100,"currency":"EUR"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NoError(t, before.Close())
	require.NoError(t, st.Close())
	orders, sent := s.counts()
	require.Equal(t, 1, orders, "every resend under the header key was the first order's")

	s.mu.Lock()
	s.lose = false
	s.mu.Unlock()
	clock.Advance(time.Minute) // well inside the key window

	st, after := deployKeyInBody(t, path, base)

	sum, err := after.Resume(ctx)
	require.NoError(t, err)
	orders, posts := s.counts()
	require.Equal(t, 1, orders)
	require.Equal(t, sent, posts, "no request without a key")
	require.Equal(t, 1, sum.Review, "%+v", sum)
	rec, err := st.Get(ctx, idem.DefaultScope, "ord-7f3a9c")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewKeyNotCarried, rec.Review)

	// The caller's Do of the journaled operation sends nothing either.
	op, err := after.Lookup(ctx, idem.DefaultScope, "ord-7f3a9c")
	require.NoError(t, err)
	_, err = after.Do(ctx, op)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorContains(t, err, "WithKeyInBody")
	orders, posts = s.counts()
	require.Equal(t, 1, orders)
	require.Equal(t, sent, posts, "no request without a key")

	// Nor does the caller's retry of its Submit, which an ErrUnknownOutcome
	// asks for: refused, its body lacking the key, and told that the
	// journaled operation under the key stands, lest a caller trusting
	// "nothing journaled" order again under a new key.
	_, err = after.Submit(ctx, idem.Request{Key: "ord-7f3a9c", URL: s.srv.URL + "/v1/orders", Body: []byte(`{"amount":100,"currency":"EUR"}`)})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "Lookup")
	orders, posts = s.counts()
	require.Equal(t, 1, orders)
	require.Equal(t, sent, posts, "no request without a key")
}

// An order prepared by a release that sent the key in the header (an
// outbox's intent, journaled, never sent) is sent after a deploy that
// moved the key into the body (WithKeyInBody). The server sits behind a
// sidecar with Istio's default retry policy (retryingSidecar: an
// upstream 503 is retried, POST or not): the first copy commits its
// order and the pod's connection resets. With a key the retry replays
// that order; the journaled body carries none and the new settings send
// no header, so the retry was a second order: 2 orders, settled
// succeeded with the second. Nothing is sent now: unknown, flagged
// ReviewKeyNotCarried, no order.
func TestKeyMovedIntoBodyPreparedBeforeDeploySendsNoKeylessCopy(t *testing.T) {
	ctx := context.Background()
	clock := idemtest.NewClock(epoch)
	var (
		mu     sync.Mutex
		orders int
		held   = map[string]string{}
		keys   []string
	)
	sidecar := retryingSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Date", clock.Now().UTC().Format(http.TimeFormat))
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound) // a restarted client's clock probe (HEAD)
			return
		}
		key := movingKey(r, body)
		keys = append(keys, key)
		if answer, ok := held[key]; ok && key != "" {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, answer)
			return
		}
		orders++
		answer := fmt.Sprintf(`{"id":"ord_%d","status":"succeeded"}`, orders)
		if key != "" {
			held[key] = answer
		}
		if orders == 1 {
			podReset(w) // committed; the sidecar retries
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, answer)
	})
	path := filepath.Join(t.TempDir(), "idem.journal")
	base := []idem.Option{idem.WithHTTPClient(sidecar.Client()), idem.WithClock(clock)}

	st, err := journal.Open(path)
	require.NoError(t, err)
	before, err := idem.New(st, base...)
	require.NoError(t, err)
	_, err = before.Prepare(ctx, idem.Request{Key: "ord-5d1e08", URL: sidecar.URL + "/v1/orders", Body: []byte(`{"amount":100,"currency":"EUR"}`)})
	require.NoError(t, err)
	require.NoError(t, before.Close())
	require.NoError(t, st.Close())

	st, after := deployKeyInBody(t, path, base)

	sum, err := after.Resume(ctx)
	require.NoError(t, err)
	mu.Lock()
	require.Zero(t, orders, "keys sent: %q", keys)
	mu.Unlock()
	require.Equal(t, 1, sum.Review, "%+v", sum)
	rec, err := st.Get(ctx, idem.DefaultScope, "ord-5d1e08")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyNotCarried, rec.Review)

	op, err := after.Lookup(ctx, idem.DefaultScope, "ord-5d1e08")
	require.NoError(t, err)
	_, err = after.Do(ctx, op)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, orders, "keys sent: %q", keys)
}
