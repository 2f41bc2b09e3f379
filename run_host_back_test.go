package idem_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// blipThenGate refuses the first `refuse` requests to one host (a short
// outage), then holds every request, to any host, until `hold` of them
// wait together, and then lets everything through: the test decides
// which visits of a pass are in flight at once.
type blipThenGate struct {
	base   http.RoundTripper
	host   string
	refuse int
	hold   int

	mu      sync.Mutex
	refused int
	held    int
	open    chan struct{}
}

func (b *blipThenGate) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	if r.URL.Host == b.host && b.refused < b.refuse {
		b.refused++
		b.mu.Unlock()
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	select {
	case <-b.open:
	default:
		if b.held++; b.held == b.hold {
			close(b.open)
		}
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	case <-time.After(10 * time.Second): // the test fails on what is left unsettled
	}
	return b.base.RoundTrip(r)
}

// A host Run took for unreachable and that answers again must get its
// operations visited again at once, not pushed back. Here the host's
// outage is found with the last of its due operations (nothing is
// postponed then), and later, when the host is back, its probe answers
// while the other operations of the same pass wait their turn: they were
// pushed back by an hour (the host "down" since an unknown time) and
// never brought back, past the key window, and flagged for a person
// though the server answers. Default settings but the clock.
func TestRunDoesNotPostponeAHostThatAnswersAgain(t *testing.T) {
	giveUp := 2 * idem.DefaultResumeConcurrency
	const later = 8 // the host's operations due after its outage was found
	others := idem.DefaultResumeConcurrency - 1
	clock := idemtest.NewClock(epoch)
	down, up := downAndUp(t, clock)
	// Every answer is lost: all executed, none confirmed.
	store, send, closeSetup := unconfirmed(t, clock)
	due := map[string]time.Duration{} // after the set-up
	submit := func(srv *idemtest.Server, key string, at time.Duration) {
		send(srv, key)
		due[key] = at
	}
	for i := range giveUp {
		submit(down, fmt.Sprintf("a-%02d", i), 0) // due at Run's first pass, which finds the outage
	}
	for i := range later {
		submit(down, fmt.Sprintf("b-%02d", i), 7*time.Second) // due at its third pass (every 5 s)
	}
	for i := range others {
		submit(up, fmt.Sprintf("c-%02d", i), 8*time.Second) // the same pass, after them
	}
	closeSetup()
	start := clock.Now() // the set-up's backoffs moved the clock
	for key, at := range due {
		_, err := store.Update(t.Context(), idem.DefaultScope, key, func(r *journal.Record) error { r.NextDue = start.Add(at); return nil })
		require.NoError(t, err)
	}

	// The host refuses the first pass's visits; in the third, its probe
	// answers only once it and the other host's visits hold every worker
	// they may (WithResumeConcurrency each host at most): the host's other
	// operations have all been passed over by then.
	network := &blipThenGate{base: http.DefaultTransport, host: strings.TrimPrefix(down.URL, "http://"),
		refuse: giveUp, hold: 1 + min(others, idem.DefaultResumeConcurrency), open: make(chan struct{})}
	type settlement struct {
		key string
		at  time.Time
	}
	settled := make(chan settlement, len(due))
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock),
		idem.WithSettleFunc(func(r *idem.Result) { settled <- settlement{r.Key, clock.Now()} }))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := runAsync(ctx, c)

	// Run's clock runs as fast as its passes: wait until every operation
	// settled, or the clock is past the key window.
	at := map[string]time.Time{}
	deadline := time.After(20 * time.Second)
	for len(at) < len(due) && clock.Now().Before(start.Add(idem.DefaultKeyRetention+time.Minute)) {
		select {
		case s := <-settled:
			at[s.key] = s.at
		case err := <-ran:
			t.Fatalf("Run() returned %v", err)
		case <-deadline:
			t.Fatalf("%d of %d operations settled after 20s (clock %v)", len(at), len(due), clock.Now().Sub(start))
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	for key := range due {
		if _, ok := at[key]; ok {
			continue
		}
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		t.Errorf("%s: %s, due %v, review %q: not settled %v after its host answered again",
			key, rec.State, rec.NextDue.Sub(start), rec.Review, clock.Now().Sub(start))
	}
	for key, when := range at {
		require.Less(t, when.Sub(start), 2*time.Minute, "clock time at which %s settled", key)
	}
	for key := range due {
		srv := down
		if strings.HasPrefix(key, "c-") {
			srv = up
		}
		require.Equal(t, 1, srv.Effects("", key), "side effects of %s", key)
	}
}

// refusing refuses the connections for the requests to one host, and for
// those that carry a key with a given prefix (net/http's trace shows them
// unsent), and passes the rest to base.
type refusing struct {
	base   http.RoundTripper
	host   string // when set
	prefix string // when set
}

var refuseDial = &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}}

func (f *refusing) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.host != "" && r.URL.Host == f.host || f.prefix != "" && strings.HasPrefix(r.Header.Get("Idempotency-Key"), f.prefix) {
		return refuseDial.RoundTrip(r)
	}
	return f.base.RoundTrip(r)
}

// A host is taken for unreachable on the silence of its own exchanges
// only: a result endpoint on another host that is down says nothing of
// the host the orders go to. Here the orders' server answers, its result
// endpoint (another host) does not: the operations that may have been
// sent cannot be settled (each visit's query goes unanswered), but those
// never sent must be sent on Run's first pass, not postponed as if their
// server were down. Default settings but the clock, and a result
// endpoint.
func TestRunJudgesAHostByItsOwnExchanges(t *testing.T) {
	giveUp := 2 * idem.DefaultResumeConcurrency
	maybeSent := giveUp + idem.DefaultResumeConcurrency // every visit begun before the host could be taken for down
	const neverSent = 8
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, idemtest.WithClock(clock.Now))
	results, err := idemtest.NewServer(idemtest.WithClock(clock.Now)) // another host: down during Run
	require.NoError(t, err)
	t.Cleanup(results.Close)
	resultHost := strings.TrimPrefix(results.URL, "http://")
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })

	// The set-up: "m-" orders executed, their answers lost; "p-" orders
	// never sent (their connections refused).
	lossy := &outage{base: http.DefaultTransport}
	lossy.mode.Store(netLossy)
	endpoint := idem.WithResultEndpoint(results.URL + "/operations/{key}")
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: &refusing{base: lossy, host: resultHost, prefix: "p-"}}),
		idem.WithClock(clock), endpoint, idem.WithMaxAttempts(1))
	require.NoError(t, err)
	var keys []string
	for i := range maybeSent {
		keys = append(keys, fmt.Sprintf("m-%02d", i))
	}
	for i := range neverSent {
		keys = append(keys, fmt.Sprintf("p-%02d", i))
	}
	for _, key := range keys {
		res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, key)
		want := idem.StateUnknown
		if strings.HasPrefix(key, "p-") {
			want = idem.StatePending
		}
		require.Equal(t, want, res.State, key)
	}
	require.NoError(t, c.Close())
	start := clock.Now()
	for i, key := range keys { // due in this order, the never sent last
		_, err := store.Update(t.Context(), idem.DefaultScope, key, func(r *journal.Record) error {
			r.NextDue = start.Add(time.Duration(i-len(keys)) * time.Millisecond)
			return nil
		})
		require.NoError(t, err)
	}

	settled := make(chan string, len(keys))
	c, err = idem.New(store, idem.WithHTTPClient(&http.Client{Transport: &refusing{base: http.DefaultTransport, host: resultHost}}),
		idem.WithClock(clock), endpoint, idem.WithSettleFunc(func(r *idem.Result) {
			if clock.Now().Equal(start) {
				settled <- r.Key
			}
		}))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := runAsync(ctx, c)
	var first []string
	deadline := time.After(20 * time.Second)
	for len(first) < neverSent && clock.Now().Equal(start) {
		select {
		case k := <-settled:
			first = append(first, k)
		case err := <-ran:
			t.Fatalf("Run() returned %v", err)
		case <-deadline:
			t.Fatalf("%d never-sent operations settled after 20s, clock %v", len(first), clock.Now().Sub(start))
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	for len(settled) > 0 {
		first = append(first, <-settled)
	}
	require.Len(t, first, neverSent, "operations settled on Run's first pass (%v): its never-sent orders, to a server that answers", first)
	for i := range neverSent {
		require.Equal(t, 1, srv.Effects("", fmt.Sprintf("p-%02d", i)), "side effects of p-%02d", i)
	}
}
