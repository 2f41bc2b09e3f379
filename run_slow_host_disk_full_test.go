package idem_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A pass of Run whose slow host's waiting operations it cannot push back,
// because the journal refuses writes, must not claim them again and
// again: the file journal's leases are kept in memory, so on a full disk
// (ENOSPC; the disk of a service whose logs filled it) its claims still
// succeed while every write fails, and each claim of a slow host's
// backlog is set aside whole, its push-back failing at its first write,
// its claims given up, and claimed again at once, with no end but the
// slow visits' own failures, an attempt timeout later: a loop of failing
// writes as fast as the disk refuses them. The slow server holds its
// requests within the attempt timeout (Klarna holds one up to 59 s:
// docs.klarna.com, "Request Timeout"). Default settings but the clock.
func TestRunSlowHostOnAFullDiskClaimsNoMore(t *testing.T) {
	const backlog = 600 // claims of the whole batch, set aside whole
	clock := idemtest.NewClock(epoch)
	slow, other := downAndUp(t, clock)
	store := backlogThen(t, clock, slow, "slow", backlog, other)
	faulty := &faultyStore{Store: store}
	network := &heldHost{base: http.DefaultTransport, host: strings.TrimPrefix(slow.URL, "http://"), release: make(chan struct{})}
	c, err := idem.New(faulty, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	defer close(network.release)
	ran := runAsync(t.Context(), c)

	deadline := time.After(5 * time.Second)
	for network.held.Load() < 1 { // the probe, the host's other visits waiting for it
		select {
		case err := <-ran:
			t.Fatalf("Run() returned %v", err)
		case <-deadline:
			t.Fatalf("%d requests held", network.held.Load())
		case <-time.After(time.Millisecond):
		}
	}
	faulty.set(errNoSpace, nil, nil) // the disk fills
	// Past the stall (a quarter of the attempt timeout), before the
	// held requests time out.
	select {
	case err := <-ran:
		t.Fatalf("Run() returned %v", err)
	case <-time.After(idem.DefaultAttemptTimeout * 3 / 4):
	}
	faulty.mu.Lock()
	refused := faulty.updates
	faulty.mu.Unlock()
	require.Zero(t, network.ended.Load(), "held requests that ended")
	require.Equal(t, 1, refused, "writes refused while the slow host's requests are held: the push-back's first, then no more claims")
}
