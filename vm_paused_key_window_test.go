package idem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// pausedGuestClock is the clock of a guest VM that was paused: the true
// time (the shared clock) less lost, the time the guest did not see pass.
// Its monotonic reading was paused with it, so no step shows.
// Slewed (slew), it gains on the true time at chrony's default
// maxslewrate, 83333 ppm (chrony.conf(5) maxslewrate), until it reads
// it again.
type pausedGuestClock struct {
	*idemtest.Clock
	start    time.Time
	mu       sync.Mutex
	lost     time.Duration
	slewFrom time.Time
}

func (c *pausedGuestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, lost := c.Clock.Now(), c.lost
	if !c.slewFrom.IsZero() {
		lost -= min(lost, now.Sub(c.slewFrom)/12) // 83333 ppm
	}
	return now.Add(-lost)
}

// slew is NTP putting the guest's clock right from now on by slewing it,
// as chrony does an offset under its makestep threshold.
func (c *pausedGuestClock) slew() {
	c.mu.Lock()
	c.slewFrom = c.Clock.Now()
	c.mu.Unlock()
}

func (c *pausedGuestClock) Monotonic() time.Duration { return c.Now().Sub(c.start) }

// pause stops the guest for d of true time.
func (c *pausedGuestClock) pause(d time.Duration) {
	c.mu.Lock()
	c.lost += d
	c.mu.Unlock()
	c.Clock.Advance(d)
}

// putRight is NTP (or the guest agent's virDomainSetTime) stepping the
// guest's clock forward to the true time again.
func (c *pausedGuestClock) putRight() {
	c.mu.Lock()
	c.lost = 0
	c.mu.Unlock()
}

// resetAsWritten is a connection that died as req was written: the
// request may have reached the server, for all the client can tell, and
// did not.
func resetAsWritten(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	return nil, errors.New("read tcp: connection reset by peer")
}

// losingTransport passes requests on, and loses the answer to the first
// POST for each key in lose (the connection died): taken by the server
// and the guest paused for the duration given, if any; never forwarded,
// if none (it died as the request was written).
type losingTransport struct {
	base  http.RoundTripper
	clock *pausedGuestClock
	mu    sync.Mutex
	lose  map[string]time.Duration
}

func (l *losingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	l.mu.Lock()
	pause, lost := l.lose[key]
	if req.Method == http.MethodPost {
		delete(l.lose, key)
	}
	l.mu.Unlock()
	if req.Method != http.MethodPost || !lost {
		return l.base.RoundTrip(req)
	}
	if pause == 0 {
		return resetAsWritten(req)
	}
	resp, err := l.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	l.clock.pause(pause)
	return nil, errors.New("read tcp: connection reset by peer")
}

// guestClient is a client on guest's clock through rt, at default
// settings but the result endpoint result, and get reads the record it
// journaled for a key.
func guestClient(t *testing.T, rt http.RoundTripper, guest *pausedGuestClock, result string) (c *idem.Client, get func(key string) *journal.Record) {
	t.Helper()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err = idem.New(store, idem.WithHTTPClient(&http.Client{Transport: rt}), idem.WithClock(guest), idem.WithResultEndpoint(result))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, func(key string) *journal.Record {
		t.Helper()
		rec, err := store.Get(context.Background(), idem.DefaultScope, key)
		require.NoError(t, err)
		return rec
	}
}

// pausedGuestOrders is a client on a guest VM's clock (guest), its
// requests through a losingTransport losing lose, to a server keeping
// keys 30 minutes with a result endpoint, at default settings but those.
// submit is the caller's request for key, redelivered a minute apart
// until it returns a settled outcome or is flagged: the record it left.
func pausedGuestOrders(t *testing.T, lose map[string]time.Duration) (clock *idemtest.Clock, guest *pausedGuestClock,
	srv *idemtest.Server, submit func(key string) *journal.Record) {
	t.Helper()
	clock = idemtest.NewClock(epoch)
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now), idemtest.WithRetention(30*time.Minute))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	guest = &pausedGuestClock{Clock: clock, start: clock.Now()}
	tr := &losingTransport{base: srv.Client().Transport, clock: guest, lose: lose}
	c, get := guestClient(t, tr, guest, srv.URL+"/operations/{key}")
	ctx := t.Context()
	submit = func(key string) *journal.Record {
		t.Helper()
		req := idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)}
		_, err := c.Submit(ctx, req)
		for i := 0; i < 5 && errors.Is(err, idem.ErrUnknownOutcome) && !errors.Is(err, idem.ErrNeedsReview); i++ {
			clock.Advance(time.Minute)
			_, err = c.Submit(ctx, req)
		}
		return get(key)
	}
	return clock, guest, srv, submit
}

// A guest VM paused by its hypervisor (virsh suspend, a snapshot with
// memory) sees no time pass: its clock, wall and monotonic, stands still,
// and reads behind the true time after the resume until NTP puts it
// right (libvirt added virDomainSetTime for a domain "resumed just
// recently and NTP is not configured or hasn't kicked in yet ... NTP may
// refuse to re-set the clock if the skew is too big",
// https://www.redhat.com/archives/libvir-list/2014-February/msg00927.html).
// An order sent as a 35-minute pause began, its answer lost with the
// connection, is 35 minutes old by the server's clock, whose idempotency
// store has forgotten its key (30 minutes, the default Lifetime of
// Fiber's idempotency middleware,
// https://docs.gofiber.io/api/middleware/idempotency/; a result endpoint
// reading the same store: modelled), while our clock calls it seconds
// old: before, it was sent again and ordered twice. The server's answers'
// Dates, from before the pause and after, show our clock lost the time:
// it stays unknown, for a person, ordered once. An order first sent after
// the pause lost nothing to it: its lost answer is settled by a resend,
// ordered once, unflagged.
func TestKeyWindowOutlivesPausedVM(t *testing.T) {
	clock, _, srv, submit := pausedGuestOrders(t, map[string]time.Duration{"paused": 35 * time.Minute, "after": 0})

	rec := submit("before") // its answer's Date teaches the host's clock
	require.Equal(t, idem.StateSucceeded, rec.State)
	clock.Advance(time.Minute)

	rec = submit("paused")
	require.Equal(t, 1, srv.Effects("", "paused"), "orders for the key sent as the VM paused")
	posts := 0
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost && r.Key == "paused" {
			posts++
		}
	}
	require.Equal(t, 1, posts, "sends of the key that reached the server")
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewClockStepped, rec.Review)

	clock.Advance(time.Minute)
	rec = submit("after")
	require.Equal(t, 1, srv.Effects("", "after"), "orders for the key sent after the pause")
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.Empty(t, rec.Review)
}

// A guest paused twice in a process's life, its clock put right in
// between (NTP, or the guest agent): after the first pause the host's
// Date read 35 minutes ahead of ours, after the correction level with it
// again, and the second pause puts it 35 minutes ahead once more. That
// is a gain of 35 minutes since an order sent as the second pause began,
// though no higher than the host ever read: it stays unknown, ordered
// once, as the first pause's did.
func TestKeyWindowOutlivesSecondPauseOfVM(t *testing.T) {
	clock, guest, srv, submit := pausedGuestOrders(t, map[string]time.Duration{"first": 35 * time.Minute, "second": 35 * time.Minute})

	require.Equal(t, idem.StateSucceeded, submit("before").State)
	clock.Advance(time.Minute)
	rec := submit("first")
	require.Equal(t, 1, srv.Effects("", "first"))
	require.Equal(t, idem.ReviewClockStepped, rec.Review)

	guest.putRight()
	clock.Advance(time.Minute)
	require.Equal(t, idem.StateSucceeded, submit("between").State) // its Date: level with ours again
	clock.Advance(time.Minute)

	rec = submit("second")
	require.Equal(t, 1, srv.Effects("", "second"), "orders for the key sent as the second pause began")
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewClockStepped, rec.Review)
}

// cachingTransport passes requests on, serving the result query for key
// copy as a CDN's copy would (its Date the origin's of age ago, and Age
// saying so: RFC 9111 4, 5.1; a CDN may ignore the query's no-cache), and
// failing every request for key down (the connection died as it was
// written) while failing is set.
type cachingTransport struct {
	base       http.RoundTripper
	copy, down string
	age        time.Duration
	mu         sync.Mutex
	failing    bool
}

func (c *cachingTransport) fail(on bool) {
	c.mu.Lock()
	c.failing = on
	c.mu.Unlock()
}

func (c *cachingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	failing := c.failing
	c.mu.Unlock()
	if failing && (req.Header.Get("Idempotency-Key") == c.down || req.URL.Path == "/operations/"+c.down) {
		return resetAsWritten(req)
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || req.URL.Path != "/operations/"+c.copy {
		return resp, err
	}
	if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
		resp.Header.Set("Date", d.Add(-c.age).Format(http.TimeFormat))
		resp.Header.Set("Age", strconv.Itoa(int(c.age/time.Second)))
	}
	return resp, nil
}

// A result query a CDN answered from a copy ten minutes old: its Date
// alone reads the host's clock ten minutes behind, as if ours had been
// put right, and the next fresh answer would read ten minutes gained
// since an order sent in between, whose key, nine minutes old, would be
// judged past the default window and flagged. Its Age says how old the
// copy is: nothing gained, the order, its answer lost before it reached
// the server, is sent again and made once, unflagged. At default
// settings but the clock and the result endpoint.
func TestCachedResultDateGainsNothing(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now), idemtest.WithRetention(time.Hour))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	guest := &pausedGuestClock{Clock: clock, start: clock.Now()}
	lose := &losingTransport{base: srv.Client().Transport, clock: guest,
		lose: map[string]time.Duration{"copied": time.Nanosecond}}
	tr := &cachingTransport{base: lose, copy: "copied", down: "between", age: 10 * time.Minute}
	c, get := guestClient(t, tr, guest, srv.URL+"/operations/{key}")
	ctx := t.Context()
	submit := func(key string) (*journal.Record, error) {
		t.Helper()
		_, err := c.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
		return get(key), err
	}

	rec, err := submit("before")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	clock.Advance(time.Minute)
	rec, err = submit("copied") // its answer lost, settled by the copy
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	clock.Advance(time.Second)
	tr.fail(true)
	_, err = submit("between")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	tr.fail(false)
	clock.Advance(9 * time.Minute)
	rec, err = submit("after") // a fresh answer
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)

	rec, err = submit("between")
	require.NoError(t, err)
	require.Equal(t, 1, srv.Effects("", "between"), "orders for the key sent between the copy and the fresh answer")
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.Empty(t, rec.Review)
}
