package idem_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// stallingClock is steppedBackHour's clock, an hour behind, on a VM that
// stalls once paused is set: each reading of its clock from then on comes
// stall after the last (a guest starved of CPU by its host, paused for a
// live migration), the true time moving with it.
type stallingClock struct {
	*skewedClock
	paused atomic.Bool
	stall  time.Duration
}

func (c *stallingClock) Now() time.Time {
	if c.paused.Load() {
		c.Clock.Advance(c.stall)
	}
	return c.skewedClock.Now()
}

// silentHead is a host whose HEAD on the submit path never answers (a
// listing slower than the attempt timeout, slowListing) while its POSTs
// go through; the HEAD's end pauses clock.
type silentHead struct {
	base  http.RoundTripper
	clock *stallingClock
	heads atomic.Int32
}

func (s *silentHead) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodHead {
		return s.base.RoundTrip(r)
	}
	s.heads.Add(1)
	<-r.Context().Done()
	s.clock.paused.Store(true)
	return nil, r.Context().Err()
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) calls Resume at start-up for two orders an earlier process
// sent; their answers were lost. The server is Stripe-like and forgot
// both keys 50 minutes ago by its own clock (RFC 9110 6.6.1's Date). The
// HEAD asking the host's clock times out, and the VM stalls: each step
// after it comes 11 s after the last, past the attempt timeout after
// which the host may be asked again. The resends behind the probe looked
// at the clock once more before going: past that time, they took the
// host for silent no more and went on our clock alone, each a second
// order on a forgotten key. A probe that timed out holds its resends
// until the host is asked again, however late they look. Default
// settings but the clock.
func TestClockProbeTimedOutHoldsItsResendsWhenTheyLookLate(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	clock, srv, path, keys := stripeBacklog(t, "late", 2)
	clock.Advance(70 * time.Minute)
	clk := &stallingClock{skewedClock: &skewedClock{Clock: clock}, stall: idem.DefaultAttemptTimeout + time.Second}
	clk.offset.Store(int64(-time.Hour))
	network := &silentHead{base: srv.Client().Transport, clock: clk}
	store, c := openOn(t, path, network, clk)

	_, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, network.heads.Load(), "clock probes: the one that timed out")
	requireHeldUnknown(t, srv, store, keys)
}
