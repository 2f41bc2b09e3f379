package idem_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Delta-seconds with a decimal fraction, as real servers send them
// (Shopify's "Retry-After: 2.0", others' "1.5"), are read, rounded up to
// a whole millisecond: never sooner than asked. Anything else that is not
// plain digits with an optional fraction is ignored, and what is huge
// saturates, as it always did.
func TestParseRetryAfterDecimal(t *testing.T) {
	now := epoch
	year := 365 * 24 * time.Hour
	for _, tt := range []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"2.0", 2 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{" 0.25 ", 250 * time.Millisecond, true},
		{"0.0001", time.Millisecond, true}, // rounded up, not to 0
		{"1.0005", 1001 * time.Millisecond, true},
		{"1.000", time.Second, true},
		{"0.0", 0, true},
		{"99999999999999999999.5", year, true},
		{"31536000.5", year, true},
		{"1." + strings.Repeat("9", 60), 2 * time.Second, true},
		{"1.0" + strings.Repeat("0", 50) + "1", 1001 * time.Millisecond, true},
		{"1e9999", 0, false},
		{"1e3", 0, false},
		{"-1", 0, false},
		{"-0.5", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"0x10", 0, false},
		{"+5", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1.5.5", 0, false},
		{"1,5", 0, false},
		{"1_000", 0, false},
		{"1.5s", 0, false},
		{strings.Repeat("9", 65), 0, false},
	} {
		got, ok := idem.ParseRetryAfter(tt.in, now)
		require.Equalf(t, tt.wantOK, ok, "ParseRetryAfter(%q) ok", tt.in)
		require.Equalf(t, tt.want, got, "ParseRetryAfter(%q)", tt.in)
	}
}

// ParseRetryAfterHeader judges an HTTP-date against the answer's own Date
// (both the server's clock), falling back to ours only when Date is
// missing or garbage, and to the shorter wait of both when Date is days
// from ours; reads Retry-After-Ms when no Retry-After
// is usable; and takes the longest of repeated Retry-After fields.
func TestParseRetryAfterHeader(t *testing.T) {
	now := epoch
	server := now.Add(10 * time.Minute) // the server's clock is 10 minutes ahead of ours
	date := func(t time.Time) string { return t.Format(http.TimeFormat) }
	for _, tt := range []struct {
		name   string
		h      http.Header
		want   time.Duration
		wantOK bool
	}{
		{"date judged by the server's Date, our clock behind", http.Header{"Date": {date(server)}, "Retry-After": {date(server.Add(5 * time.Second))}}, 5 * time.Second, true},
		{"date judged by the server's Date, our clock ahead", http.Header{"Date": {date(now.Add(-10 * time.Minute))}, "Retry-After": {date(now.Add(-10*time.Minute + 30*time.Second))}}, 30 * time.Second, true},
		{"no Date: our clock", http.Header{"Retry-After": {date(now.Add(7 * time.Second))}}, 7 * time.Second, true},
		{"garbage Date: our clock", http.Header{"Date": {"yesterday"}, "Retry-After": {date(now.Add(7 * time.Second))}}, 7 * time.Second, true},
		{"absurd Date: our clock", http.Header{"Date": {date(time.Unix(0, 0))}, "Retry-After": {date(now.Add(7 * time.Second))}}, 7 * time.Second, true},
		// A Date days off ours: one clock is wrong by days, either; the shorter wait asked.
		{"Date days behind ours: the server's wait", http.Header{"Date": {date(now.Add(-72 * time.Hour))}, "Retry-After": {date(now.Add(-72*time.Hour + 5*time.Second))}}, 5 * time.Second, true},
		{"Date days ahead of ours: the server's wait", http.Header{"Date": {date(now.Add(72 * time.Hour))}, "Retry-After": {date(now.Add(72*time.Hour + 5*time.Second))}}, 5 * time.Second, true},
		{"Date days off, date past by both: no wait", http.Header{"Date": {date(now.Add(72 * time.Hour))}, "Retry-After": {date(now.Add(-time.Minute))}}, 0, true},
		{"Date does not change delta-seconds", http.Header{"Date": {date(server)}, "Retry-After": {"3"}}, 3 * time.Second, true},
		{"date before the server's Date: no wait", http.Header{"Date": {date(server)}, "Retry-After": {date(server.Add(-time.Minute))}}, 0, true},
		{"retry-after-ms", http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, true},
		{"retry-after-ms decimal, rounded up", http.Header{"Retry-After-Ms": {"20.2"}}, 21 * time.Millisecond, true},
		{"Retry-After wins over retry-after-ms", http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"1500"}}, 7 * time.Second, true},
		{"garbage Retry-After: retry-after-ms", http.Header{"Retry-After": {"soon"}, "Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, true},
		{"retry-after-ms huge saturates", http.Header{"Retry-After-Ms": {strings.Repeat("9", 30)}}, 365 * 24 * time.Hour, true},
		{"retry-after-ms garbage", http.Header{"Retry-After-Ms": {"-1"}}, 0, false},
		{"repeated Retry-After: the longest", http.Header{"Retry-After": {"2", "soon", "9", "4"}}, 9 * time.Second, true},
		{"folded by a proxy: the longest", http.Header{"Retry-After": {"5, 10,3"}}, 10 * time.Second, true},
		{"folded, one garbage", http.Header{"Retry-After": {"5, soon"}}, 5 * time.Second, true},
		{"none", http.Header{"Date": {date(server)}}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := idem.ParseRetryAfterHeader(tt.h, now)
			require.Equal(t, tt.wantOK, ok, "ok")
			require.Equal(t, tt.want, got)
		})
	}
}

// retryAfterVendor answers the first submit 429 with header (the date
// values computed from the server's clock, skew ahead of ours), then 201.
func retryAfterVendor(t *testing.T, clock *idemtest.Clock, skew time.Duration, header func(server time.Time) http.Header) *vendor {
	t.Helper()
	return newVendor(t, shape{status: http.StatusTooManyRequests, header: header(clock.Now().Add(skew)), body: `{"error":"slow down"}`},
		shape{status: http.StatusCreated, body: `{"id":"ord_1"}`})
}

// A call waits what the server asked, however the server wrote it and
// whatever our clock reads against the server's: a wait judged on our
// clock behind the server's by ten minutes is the cap (60 s), not the 5 s
// asked; ahead of it, an immediate resend into another 429; and so with
// our clock days off the server's. Default settings but the clock.
func TestCallWaitsWhatTheServerAsked(t *testing.T) {
	date := func(t time.Time) string { return t.Format(http.TimeFormat) }
	for _, tt := range []struct {
		name   string
		skew   time.Duration // the server's clock minus ours
		header func(server time.Time) http.Header
		want   time.Duration
	}{
		{"decimal seconds", 0, func(time.Time) http.Header { return http.Header{"Retry-After": {"2.0"}} }, 2 * time.Second},
		{"fractional seconds", 0, func(time.Time) http.Header { return http.Header{"Retry-After": {"1.5"}} }, 1500 * time.Millisecond},
		{"retry-after-ms", 0, func(time.Time) http.Header { return http.Header{"Retry-After-Ms": {"1500"}} }, 1500 * time.Millisecond},
		{"Retry-After wins over retry-after-ms", 0, func(time.Time) http.Header {
			return http.Header{"Retry-After": {"3"}, "Retry-After-Ms": {"1500"}}
		}, 3 * time.Second},
		{"HTTP-date, our clock behind", 10 * time.Minute, func(s time.Time) http.Header {
			return http.Header{"Date": {date(s)}, "Retry-After": {date(s.Add(5 * time.Second))}}
		}, 5 * time.Second},
		{"HTTP-date, our clock ahead", -10 * time.Minute, func(s time.Time) http.Header {
			return http.Header{"Date": {date(s)}, "Retry-After": {date(s.Add(5 * time.Second))}}
		}, 5 * time.Second},
		// Planned downtime's 503 (RFC 9110 10.2.3; "Dealing with scheduled
		// downtime", https://developer.mozilla.org/docs/Web/HTTP/Headers/Retry-After)
		// while our clock is set wrong by days: the Date is too far from
		// it to be believed alone, yet the wait asked is the one between
		// the server's two dates. Judged against our clock alone it was
		// none (a resend into the downtime at once), or the cap, past the
		// call's budget.
		{"HTTP-date, our clock three days ahead", -72 * time.Hour, func(s time.Time) http.Header {
			return http.Header{"Date": {date(s)}, "Retry-After": {date(s.Add(5 * time.Second))}}
		}, 5 * time.Second},
		{"HTTP-date, our clock three days behind", 72 * time.Hour, func(s time.Time) http.Header {
			return http.Header{"Date": {date(s)}, "Retry-After": {date(s.Add(5 * time.Second))}}
		}, 5 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			v := retryAfterVendor(t, clock, tt.skew, tt.header)
			c := clientFor(t, v.srv, clock)
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "ord_1", res.ResourceID)
			require.Equal(t, []time.Duration{tt.want}, clock.Sleeps(), "waits")
			v.requireKeys(t, "Idempotency-Key", "k", 2)
		})
	}
}

// Run's host rest reads the same value as a call's wait: a host whose
// clock runs 30 minutes ahead of ours and asks, by HTTP-date, for 10
// minutes of rest gets 10 minutes, not 40, for the operation it refused
// and for the others Run postpones. Default settings but the clock.
func TestRunRestsAHostAsLongAsItsOwnClockSays(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	const skew = 30 * time.Minute
	var until time.Time // in our clock: when the host's rest ends
	srv := newOrderAPI(t, clock, func(now time.Time, w http.ResponseWriter) bool {
		if until.IsZero() {
			until = now.Add(10 * time.Minute)
		}
		// Every answer's Date reads the host's clock, the orders' too:
		// net/http's own, the machine's days from the test's clock, read
		// as the host's clock gaining days since the 503s and flagged
		// the other order ReviewClockStepped whenever its resend was
		// judged after the first order's answer (a loaded machine).
		w.Header().Set("Date", now.Add(skew).Format(http.TimeFormat))
		if !now.Before(until) {
			return false
		}
		w.Header().Set("Retry-After", until.Add(skew).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	c := clientFor(t, srv.srv, clock)
	// Two orders: the first submit meets the 503 and hands off.
	for _, k := range []string{"a", "b"} {
		_, err := c.Submit(t.Context(), idem.Request{Key: k, URL: srv.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, k)
	}
	for _, k := range []string{"a", "b"} {
		rec, err := c.Lookup(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Falsef(t, rec.NextDue.After(until.Add(time.Second)), "%s due %v after the rest asked ends (%v); sleeps %v now %v", k, rec.NextDue.Sub(until), until, clock.Sleeps(), clock.Now())
	}
	e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
	runUntil(t, e, until.Add(5*time.Minute))
	_, orders := srv.counts()
	require.Equal(t, map[string]int{"a": 1, "b": 1}, orders, "orders once the rest is over")
}

// A call whose last allowed attempt is answered "429, Retry-After: 5"
// hands the operation off at once, due when the server's wait ends: it
// does not hold its caller for a wait no attempt follows, and the
// operation is not left for a further 5 s counted from the end of that
// wait, but when the wait it would have slept ends. Default settings but
// the clock.
func TestLastAttemptsWaitIsNotSlept(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	v := newVendor(t, shape{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"5"}}, body: `{"error":"slow down"}`})
	c := clientFor(t, v.srv, clock)
	_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	v.requireKeys(t, "Idempotency-Key", "k", idem.DefaultMaxAttempts)
	sleeps := clock.Sleeps()
	require.Len(t, sleeps, idem.DefaultMaxAttempts-1, "waits: one between each two attempts, none after the last")
	rec, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	now := clock.Now()
	require.False(t, rec.NextDue.Before(now.Add(5*time.Second)), "due %v from now: before the last answer's Retry-After ends", rec.NextDue.Sub(now))
	// On the reconciler's schedule, as after any spent call: its first
	// interval doubled for each two attempts (five: 30 s → 120 s), spread
	// over its second half.
	require.False(t, rec.NextDue.Before(now.Add(60*time.Second)), "due %v from now: sooner than the reconciler's schedule", rec.NextDue.Sub(now))
	require.False(t, rec.NextDue.After(now.Add(120*time.Second)), "due %v from now: past the reconciler's schedule", rec.NextDue.Sub(now))
}

// The fake server's HTTP-date Retry-After and its Date come from the
// same (injected) clock: on a clock an hour behind the wall clock's, a
// 9 s wait is 9 s, not "already over" against net/http's wall-clock
// Date.
func TestFakeServerRetryAfterDateOnItsClock(t *testing.T) {
	clock := idemtest.NewClock(time.Now().Add(-time.Hour).Truncate(time.Second))
	srv := newServer(t, idemtest.WithClock(clock.Now))
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k", RetryAfter: 9 * time.Second, HTTPDate: true}))
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, []time.Duration{9 * time.Second}, clock.Sleeps())
	require.Equal(t, 1, srv.Effects("", "k"))
}
