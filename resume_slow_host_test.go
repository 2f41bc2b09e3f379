package idem_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A host that answers, but slowly, must not hold start-up's Resume on the
// other hosts' operations for as long as its backlog lasts. An acquirer
// may hold each request for many seconds before it answers (Klarna's
// hold one up to their 59 s idle timeout, then answer 500 TIMEOUT:
// docs.klarna.com, "Request Timeout"; Adyen's API library waits 30 s by
// default): every answer comes, so the host never looks unreachable. Here
// the slow host's backlog was journaled first and its requests are held,
// well within the attempt timeout, until the end. Resume lets one host
// hold at most WithResumeConcurrency of its workers (the first of its
// visits asks the host's clock with a HEAD, alone: no answer of the
// host's has taught it; the others wait for its answer), so the healthy
// server's operations settle while every request to the slow host is
// still held; once the slow host answers, each of its operations is
// visited once and settles, executed once. Default settings but the
// clock.
func TestResumeSlowHostLeavesTheOthersTheirWorkers(t *testing.T) {
	const backlog = 20
	share := idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	slow, healthy := downAndUp(t, clock)
	healthyKeys := []string{"healthy-0", "healthy-1"}
	store := backlogThen(t, clock, slow, "slow", backlog, healthy, healthyKeys...)

	network := &heldHost{base: http.DefaultTransport, host: strings.TrimPrefix(slow.URL, "http://"), release: make(chan struct{})}
	release := sync.OnceFunc(func() { close(network.release) })
	t.Cleanup(release) // a failing test must not leave Resume's requests held
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	type resumed struct {
		sum idem.Summary
		err error
	}
	done := make(chan resumed, 1)
	go func() {
		sum, err := c.Resume(t.Context())
		done <- resumed{sum, err}
	}()

	// Well within the attempt timeout, which would end the held requests;
	// until the slow host holds its probe too, so that the healthy
	// operations are seen to settle beside it, not before it.
	deadline := time.After(idem.DefaultAttemptTimeout * 3 / 4)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for settled := 0; settled < len(healthyKeys) || network.held.Load() < 1; {
		select {
		case r := <-done:
			t.Fatalf("Resume() returned %+v, %v while the slow host's requests were held", r.sum, r.err)
		case <-deadline:
			t.Fatalf("%d of %d healthy operations settled (%d requests to the slow host held, %d ended)",
				settled, len(healthyKeys), network.held.Load(), network.ended.Load())
		case <-poll.C:
		}
		settled = succeededOf(t, store, healthyKeys)
	}
	for _, key := range healthyKeys {
		require.Equal(t, 1, healthy.Effects("", key), "side effects of %s", key)
	}
	require.Equal(t, 2*len(healthyKeys)+1, healthy.Stats().Requests, "the healthy server's requests: each key's lost one, then Resume's HEAD and resends")
	require.Equal(t, 1, serverHeads(t, healthy), "clock probes to the healthy server")
	require.Zero(t, network.ended.Load(), "requests to the slow host that ended before the healthy operations settled")
	require.Equal(t, int64(1), network.held.Load(), "requests held by the slow host: its probe, a HEAD")
	require.Equal(t, int64(1), network.peak.Load(), "requests held at once by the slow host")

	// The slow host answers: every one of its operations is visited once
	// and settles, executed once, under its one key.
	release()
	var r resumed
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Resume() did not return after the slow host answered")
	}
	require.NoError(t, r.err)
	require.Equal(t, idem.Summary{Visited: backlog + len(healthyKeys), Succeeded: backlog + len(healthyKeys)}, r.sum)
	require.Zero(t, network.ended.Load(), "held requests that timed out")
	require.LessOrEqual(t, network.peak.Load(), int64(share), "requests held at once by the slow host")
	sent := map[string]int{}
	for _, req := range slow.Requests() {
		if req.Method != http.MethodHead {
			sent[req.Key]++
		}
	}
	require.Equal(t, 1, serverHeads(t, slow), "clock probes to the slow server")
	require.Len(t, sent, backlog, "keys the slow server saw")
	for i := range backlog {
		key := fmt.Sprintf("slow-%03d", i)
		require.Equal(t, 1, slow.Effects("", key), "side effects of %s", key)
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, rec.State, key)
		require.Len(t, rec.Attempts, 2, "%s: the lost attempt, then Resume's", key)
		require.Equal(t, len(rec.Attempts), sent[key], "%s: requests the slow server saw under its key", key)
	}
}
