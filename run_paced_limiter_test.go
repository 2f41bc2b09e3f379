package idem_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// pacedLimiter is an order API behind a rate limiter that lets one
// request a second through, by the shared clock, and answers the others
// "429, Retry-After: 1": Shopify's REST Admin API limits with a leaky
// bucket and answers 429 with a Retry-After
// (shopify.dev/docs/api/usage/rate-limits), and GitHub asks a client
// given a retry-after not to retry "until after that many seconds has
// elapsed" (docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api);
// one a second, and its bucket of one, are modelled. It keeps every key
// (a day, longer than the test) with the order's request bytes, and
// replays the order for its key; it has no result endpoint. Before from,
// and from lift on if set, its limiter is off.
type pacedLimiter struct {
	srv   *httptest.Server
	clock *idemtest.Clock
	from  time.Time
	lift  time.Time

	mu       sync.Mutex
	next     time.Time         // when the limiter lets the next request through
	orders   map[string]int    // key → orders taken
	bodies   map[string][]byte // key → the bytes of its first send
	mismatch []string          // keys sent again with other bytes
	through  int               // sends let through from `from` on
	refused  int               // sends answered 429
	last     time.Time         // the last send from `from` on
}

func newPacedLimiter(t *testing.T, clock *idemtest.Clock, from time.Time) *pacedLimiter {
	t.Helper()
	s := &pacedLimiter{clock: clock, from: from, orders: map[string]int{}, bodies: map[string][]byte{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.clock.Now()
		w.Header().Set("Content-Type", "application/json")
		// The host's clock is the shared one: by a real Date, years
		// ahead, the key would look forgotten (ReviewClockStepped).
		w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
		if !now.Before(s.from) && (s.lift.IsZero() || now.Before(s.lift)) {
			s.last = now
			if now.Before(s.next) {
				s.refused++
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, `{"errors":"Exceeded 1 calls per second for api client. Reduce request rates to resume uninterrupted service."}`)
				return
			}
			s.next = now.Add(time.Second)
			s.through++
		}
		if first, ok := s.bodies[key]; !ok {
			s.bodies[key] = body
			s.orders[key]++
		} else if !bytes.Equal(first, body) {
			s.mismatch = append(s.mismatch, key)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"ord_%s"}`, key)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// A backlog of orders, each executed and its answer lost, to a host whose
// limiter lets one request a second through and answers the rest "429,
// Retry-After: 1", no result endpoint, default settings: Run resends
// each with its key while the key window lasts. Paced to the limiter
// (one visit at a time to the host once it throttles, the next pass
// when its rest ends) it settles them all, about one a second, well
// inside the window. Before, it slept its 5 s poll after every pass
// though the rest ended after 1 s, and sent the host's share of visits
// at once into the limiter each pass: one got through every 5 s, and
// 400 orders left 191 succeeded and 209 flagged "key expired", none
// charged twice but more than half handed to a person for nothing.
func TestRunPacesItselfToAHostsLimiter(t *testing.T) {
	const backlog = 400
	clock := idemtest.NewClock(epoch)
	start := epoch.Add(time.Minute)
	srv := newPacedLimiter(t, clock, start)
	store, c, commits := pacedBacklog(t, clock, srv.srv.URL, srv.from, backlog, idem.WithHTTPClient(srv.srv.Client()))
	e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
	// Past the key window (20 min by default): what is not settled by
	// then is flagged on its next visit.
	runUntil(t, e, start.Add(time.Hour))

	srv.mu.Lock()
	through, refused, mismatch, last := srv.through, srv.refused, srv.mismatch, srv.last
	orders := maps.Clone(srv.orders)
	srv.mu.Unlock()
	succeeded, flagged := 0, 0
	for i := range backlog {
		k := fmt.Sprintf("k%03d", i)
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, 1, orders[k], "orders for %s", k)
		switch {
		case rec.Review != "":
			require.Equalf(t, idem.ReviewKeyExpired, rec.Review, "review of %s", k)
			flagged++
		case rec.State == idem.StateSucceeded:
			succeeded++
		}
	}
	secs := last.Sub(start).Seconds()
	t.Logf("settled succeeded %d, flagged %d; sends into the limiter in %.0f s: %d let through (%.2f/s), %d refused (%.2f/s); %d journal commits",
		succeeded, flagged, secs, through, float64(through)/secs, refused, float64(refused)/secs, commits.Load())
	require.Empty(t, mismatch, "keys sent again with other bytes")
	require.Equal(t, backlog, succeeded, "settled succeeded (flagged: %d)", flagged)
	// Paced, about one refused send for each let through: the one after
	// it in its second.
	require.LessOrEqual(t, refused, through+idem.DefaultResumeConcurrency, "sends refused by the limiter")
	// Each fsync'd. A pass a second that wrote back every due operation
	// of the host it did not visit (up to a claim's 256) made 65,082 of
	// them for 400 orders, a quarter of a second of disk a pass on this
	// machine's figures and more than a second on a slower disk: the
	// pass outlasted the rest.
	require.LessOrEqual(t, commits.Load(), int64(20*backlog), "journal commits")
}

// The same backlog, its limiter lifted after a minute (the bucket
// refilled, or the client's limit raised): the host lets its share of
// visits in a row through, and what Run postponed for it over its later
// rests, paced, is due at once. Left spread, 293 of 1000 orders still
// waited their turns of 8 a second 75 s after the host could take them
// all.
func TestRunBringsBackAPacedHostsBacklogWhenItsLimiterLifts(t *testing.T) {
	const backlog = 1000
	clock := idemtest.NewClock(epoch)
	start := epoch.Add(time.Minute)
	srv := newPacedLimiter(t, clock, start)
	srv.lift = start.Add(time.Minute)
	store, c, _ := pacedBacklog(t, clock, srv.srv.URL, srv.from, backlog, idem.WithHTTPClient(srv.srv.Client()))
	e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
	// The orders the limiter refused have backoffs of their own: the
	// last of them comes due within a minute of the lift.
	runUntil(t, e, srv.lift.Add(75*time.Second))

	srv.mu.Lock()
	orders := maps.Clone(srv.orders)
	srv.mu.Unlock()
	open := 0
	for i := range backlog {
		k := fmt.Sprintf("k%03d", i)
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, 1, orders[k], "orders for %s", k)
		require.Emptyf(t, rec.Review, "review of %s", k)
		if rec.State != idem.StateSucceeded {
			open++
		}
	}
	require.Zero(t, open, "orders not settled 75 s after the limiter lifted")
}

// pacedBacklog journals backlog orders to url + "/orders" (keys k000,
// k001, …), each executed and its answer lost, moves the clock to from, and
// returns the journal, a Client on it at default settings but the clock,
// and the count of that Client's journal commits.
func pacedBacklog(t *testing.T, clock *idemtest.Clock, url string, from time.Time, backlog int, opts ...idem.Option) (*journal.Store, *idem.Client, *atomic.Int64) {
	t.Helper()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	lossy := &outage{base: http.DefaultTransport}
	lossy.mode.Store(netLossy)
	setup, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: lossy}), idem.WithClock(clock), idem.WithMaxAttempts(1))
	require.NoError(t, err)
	for i := range backlog {
		_, err := setup.Submit(t.Context(), idem.Request{Key: fmt.Sprintf("k%03d", i), URL: url + "/orders", Body: fmt.Appendf(nil, `{"order":%d}`, i)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	}
	require.NoError(t, setup.Close())
	clock.Advance(from.Sub(clock.Now()))

	commits := new(atomic.Int64)
	counted := &updateHookStore{Store: store, onUpdate: func() { commits.Add(1) }}
	c, err := idem.New(counted, append([]idem.Option{idem.WithClock(clock)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return store, c, commits
}

// A limiter that lets one request a second through but asks for a wait
// of a millisecond (Retry-After-Ms, as Azure OpenAI sends it; the
// millisecond, hostile, modelled) must not have Run come back each
// millisecond: the next pass waits for the rest's end, but a second at
// least (minRestWait). Run's visits never sleep: its clock's sleeps are
// its waits between passes.
func TestRunWaitsASecondAtLeastForAHostsRest(t *testing.T) {
	const backlog = 50
	clock := idemtest.NewClock(epoch)
	var next time.Time // under the server's lock
	srv := newOrderAPI(t, clock, func(now time.Time, w http.ResponseWriter) bool {
		if !now.Before(next) {
			next = now.Add(time.Second)
			return false
		}
		w.Header().Set("Retry-After-Ms", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"code":"429","message":"Rate limit is exceeded."}}`)
		return true
	})
	store, e := throttledBacklog(t, clock, srv, backlog)
	before := len(clock.Sleeps())
	runUntil(t, e, clock.Now().Add(10*time.Minute))
	waits := clock.Sleeps()[before:]
	t.Logf("%d requests to the host; Run's waits: %v", srv.received(), waits)
	for i, d := range waits {
		require.GreaterOrEqualf(t, d, time.Second, "Run's wait %d of %d", i, len(waits))
	}
	_, orders := srv.counts()
	requireEachOrderedOnce(t, store, backlog, orders)
}

// A paced host gets one visit at a time, and is taken for slow when that
// one stalls: "answers slowly" says it had one visit at once, not the
// share (8) it would have had unpaced, which sent an operator looking
// for seven visits that were never made. The host refuses Run's first
// visits "429, Retry-After: 1", then holds the next one.
func TestRunLogsAPacedSlowHostsOneVisitAtOnce(t *testing.T) {
	const backlog = 3
	clock := idemtest.NewClock(epoch)
	start := epoch.Add(time.Minute)
	release := make(chan struct{})
	var mu sync.Mutex
	posts, held, peak := 0, 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		now := clock.Now()
		w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
		if r.Method != http.MethodPost {
			return // a clock probe
		}
		mu.Lock()
		n := 0
		if !now.Before(start) {
			posts++
			n = posts
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case n == 0: // the backlog's first sends, their answers lost
		case n <= backlog:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		default:
			mu.Lock()
			held++
			peak = max(peak, held)
			mu.Unlock()
			defer func() { mu.Lock(); held--; mu.Unlock() }()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"ord_%s"}`, r.Header.Get("Idempotency-Key"))
	}))
	t.Cleanup(srv.Close)
	var logs syncBuffer
	_, c, _ := pacedBacklog(t, clock, srv.URL, start, backlog, idem.WithHTTPClient(srv.Client()),
		idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	ctx, cancel := context.WithCancel(t.Context())
	ran := runAsync(ctx, c)
	defer func() {
		close(release)
		cancel()
		<-ran
	}()
	const msg = "idem: reconciler: a host answers slowly"
	deadline := time.After(idem.DefaultAttemptTimeout)
	for !logged(&logs, msg) {
		select {
		case err := <-ran:
			t.Fatalf("Run returned %v", err)
		case <-deadline:
			t.Fatal("the held visit was not taken for slow")
		case <-time.After(time.Millisecond):
		}
	}
	slowLines := 0
	for _, l := range logs.lines(t) {
		if m, _ := l["msg"].(string); strings.HasPrefix(m, msg) {
			slowLines++
			require.EqualValues(t, 1, l["visits_at_once"], "visits_at_once in %v", l)
		}
	}
	require.Equal(t, 1, slowLines, "lines saying the host answers slowly")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, peak, "visits held at once by the paced host")
}
