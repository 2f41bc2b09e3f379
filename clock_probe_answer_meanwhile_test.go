package idem_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// slowPathHead is an order API whose HEAD on /orders runs the slow
// listing (Rails, Django and Flask serve HEAD with the path's GET
// handler): it answers after the attempt timeout, while the POSTs answer
// at once. arrived is closed when the first HEAD comes in.
type slowPathHead struct {
	base    http.RoundTripper
	once    sync.Once
	arrived chan struct{}
}

func (s *slowPathHead) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodHead {
		return s.base.RoundTrip(r)
	}
	s.once.Do(func() { close(s.arrived) })
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) resumes 40 orders a Stripe-like server forgot 50 minutes ago
// by its own clock (RFC 9110 6.6.1's Date): a resend of any is a second
// order. The first visit asks the host's clock with a HEAD on /orders,
// which the host answers only after the attempt timeout (slowPathHead);
// meanwhile the caller's new order is answered, and its Date teaches the
// host's clock: the visits waiting behind the probe are judged by it and
// flagged. The visit that sent the probe, once it timed out, found the
// clock known and went on as it was judged before, by our stepped clock
// alone: its key was ordered twice. (The same gap opened to any visit
// that looked at the clock just before another visit's probe was
// answered: one key of 40 ordered twice in a loaded CI run of Run.) Now
// every visit that finds the host's clock learnt since it was judged is
// judged again: all 40 flagged, none resent. Default settings but the
// clock.
func TestClockLearntWhileTheProbeTimesOutJudgesItsResendAgain(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	network := &slowPathHead{arrived: make(chan struct{})}
	_, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
		network.base = base
		return network
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.Resume(t.Context())
		done <- err
	}()
	select {
	case <-network.arrived:
	case <-time.After(idem.DefaultAttemptTimeout):
		t.Fatal("Resume sent no clock probe")
	}
	_, err := c.Submit(t.Context(), idem.Request{Key: "new00", URL: srv.URL + "/orders", Body: []byte(`{"order":"new"}`)})
	require.NoError(t, err, "the caller's new order")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * idem.DefaultAttemptTimeout):
		t.Fatal("Resume did not end once the probe's attempt timed out")
	}

	want := map[string]int{"new00": 1}
	for _, k := range keys {
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.ReviewClockStepped, rec.Review, "review of %s", k)
		want[k] = 1
	}
	require.Equal(t, want, serverSubmits(t, srv), "submits per key: the lost ones and the new order, no resend")
}
