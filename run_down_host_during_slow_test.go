package idem_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A pass of Run lasts as long as a slow host's visits do, claiming on
// meanwhile; a host found unreachable must still be probed again in it,
// and its operations must not stay claimed, unvisited, until the pass
// ends. Here one server refuses connections (a provider's outage) and is
// found unreachable; the next pass probes it (still refused) while
// another server holds every request it gets, answering within the
// attempt timeout but late (Klarna holds a request up to 59 s before its
// 500 TIMEOUT: docs.klarna.com, "Request Timeout"). The refusing server
// comes back, and its operations fall due: they must settle while the
// slow server's requests are still held, each executed once, not wait
// for the slow host's visits to end. Default settings but the clock.
func TestRunProbesADownHostWhileASlowHostHoldsThePass(t *testing.T) {
	const downFirst, downLater, slowOps = 16, 8, 20
	clock := idemtest.NewClock(epoch)
	down, slow := downAndUp(t, clock)
	store, send, closeSetup := unconfirmed(t, clock)
	due := map[string]time.Duration{}
	submit := func(srv *idemtest.Server, key string, at time.Duration) {
		send(srv, key)
		due[key] = at
	}
	var downKeys []string
	for i := range downFirst {
		key := fmt.Sprintf("down-%02d", i)
		downKeys = append(downKeys, key)
		submit(down, key, 0) // Run's first pass: refused, the host found unreachable
	}
	downKeys = append(downKeys, "down-probe")
	submit(down, "down-probe", time.Second) // the second pass's probe: refused
	for i := range slowOps {
		submit(slow, fmt.Sprintf("slow-%02d", i), 2*time.Second) // the second pass: held
	}
	for i := range downLater {
		key := fmt.Sprintf("down-later-%02d", i)
		downKeys = append(downKeys, key)
		submit(down, key, 5*time.Minute) // due once the host is back
	}
	closeSetup()
	start := clock.Now()
	for key, at := range due {
		_, err := store.Update(t.Context(), idem.DefaultScope, key, func(r *journal.Record) error { r.NextDue = start.Add(at); return nil })
		require.NoError(t, err)
	}

	refusing := &hostDown{base: http.DefaultTransport, host: strings.TrimPrefix(down.URL, "http://")}
	held := &heldHost{base: refusing, host: strings.TrimPrefix(slow.URL, "http://"), release: make(chan struct{})}
	settled := make(chan string, len(due))
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: held}), idem.WithClock(clock),
		idem.WithSettleFunc(func(r *idem.Result) { settled <- r.Key }))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	defer close(held.release)
	ran := runAsync(t.Context(), c)

	// The second pass: its probe refused and recorded (handed back to
	// the reconciler, due later), the slow host's share held.
	probed := func() bool {
		rec, err := store.Get(t.Context(), idem.DefaultScope, "down-probe")
		require.NoError(t, err)
		return rec.NextDue.After(start.Add(due["down-probe"]))
	}
	deadline := time.After(5 * time.Second)
	for !probed() || held.held.Load() < int64(idem.DefaultResumeConcurrency) {
		select {
		case err := <-ran:
			t.Fatalf("Run() returned %v", err)
		case <-deadline:
			t.Fatalf("refused %d, held %d", refusing.refused.Load(), held.held.Load())
		case <-time.After(time.Millisecond):
		}
	}
	require.Equal(t, int64(downFirst+1), refusing.refused.Load(), "requests refused")
	refusing.back.Store(true)
	clock.Advance(6 * time.Minute) // every operation is due, within the key window

	keys := map[string]bool{}
	settledOnce(t, settled, ran, keys, len(downKeys), idem.DefaultAttemptTimeout*3/4, held)
	require.Zero(t, held.ended.Load(), "requests to the slow host that ended first")
	for _, key := range downKeys {
		require.True(t, keys[key], "%s settled", key)
		require.Equal(t, 1, down.Effects("", key), "side effects of %s", key)
	}
}
