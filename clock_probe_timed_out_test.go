package idem_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// backAgain is a host silent at first (blackhole: it accepts connections
// and never answers; then resets them once cut) and reachable once up.
type backAgain struct {
	hole *blackhole
	up   atomic.Bool
}

func (b *backAgain) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.up.Load() {
		return b.hole.base.RoundTrip(r)
	}
	return b.hole.RoundTrip(r)
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) resends work an earlier process journaled, by Resume at
// start-up or a caller's retry, while the API's host is silent: a
// black-holed route, a firewall dropping packets, a balancer holding
// connections with no healthy backend. The HEAD asking the host's clock
// times out and teaches nothing; the resends behind it go, and hang too
// until the balancer resets them. Minutes later the host is back. The
// server is Stripe-like: it forgot every key 50 minutes ago by its own
// clock (RFC 9110 6.6.1's Date), so a resend is a second order. A probe
// that timed out was taken as over for the process's life, and the next
// resends, Run's visits, a later Resume, the caller's next retry, went on
// a clock nothing taught: a second order per key. The host is asked
// again once an attempt timeout has passed since its probe timed out; its
// Date flags every key, none resent. Default settings but the clock.
func TestClockProbeTimedOutAtStartUpIsAskedAgain(t *testing.T) {
	for _, tc := range []struct{ name, startUp, later string }{
		{"Run after Resume", "Resume", "Run"},
		{"Resume after Resume", "Resume", "Resume"},
		{"the caller's retries", "Submit", "Submit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			network := &backAgain{}
			clock, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
				network.hole = newBlackhole(base, "")
				return network
			})
			hole := network.hole
			hole.host = strings.TrimPrefix(srv.URL, "http://") // before any request
			cut := sync.OnceFunc(func() { close(hole.cut) })
			t.Cleanup(cut) // a failing test leaves none held
			retry := func() error {
				_, err := c.Submit(t.Context(), idem.Request{Key: keys[0], URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
				return err
			}

			done := make(chan error, 1)
			go func() {
				if tc.startUp == "Resume" {
					_, err := c.Resume(t.Context())
					done <- err
					return
				}
				done <- retry()
			}()
			select {
			case <-hole.firstEnded: // by the attempt timeout
			case <-time.After(2 * idem.DefaultAttemptTimeout):
				t.Fatal("the probe's attempt did not end")
			}
			// The resends behind the probe go.
			deadline := time.After(idem.DefaultAttemptTimeout / 2)
			for !heldAfterTheFirst(hole) {
				select {
				case <-deadline:
					t.Fatal("nothing sent to the silent host after the probe")
				case <-time.After(time.Millisecond):
				}
			}
			hole.mu.Lock()
			heads, first := hole.heads, hole.firstMethod
			hole.mu.Unlock()
			require.Equal(t, http.MethodHead, first, "the first request to the silent host: the probe")
			require.Equal(t, 1, heads, "clock probes to the silent host while it held its requests")
			// The balancer gives up: the rest is reset at once (a probe
			// asked again too, as a refused one).
			cut()
			select {
			case err := <-done:
				if tc.startUp == "Resume" {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				}
			case <-time.After(idem.DefaultAttemptTimeout / 2):
				t.Fatalf("%s did not end once the silent host reset its connections", tc.startUp)
			}
			require.Zero(t, serverHeads(t, srv), "clock probes that reached the server while it was silent")

			// The outage lasted minutes; the host is back.
			clock.Advance(5 * time.Minute)
			network.up.Store(true)
			resent := keys // what the later call judges
			switch tc.later {
			case "Run":
				runUntil(t, &env{t: t, clock: clock, client: c, ctx: t.Context()}, clock.Now().Add(10*time.Minute))
			case "Resume":
				_, err := c.Resume(t.Context())
				require.NoError(t, err)
			case "Submit":
				err := retry()
				resent = keys[:1]
				require.Equal(t, 1, srv.Effects("", keys[0]), "orders for the key retried")
				require.ErrorIs(t, err, idem.ErrNeedsReview)
			}

			lost := map[string]int{}
			for _, k := range keys {
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
				lost[k] = 1
			}
			for _, k := range resent {
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, idem.ReviewClockStepped, rec.Review, "review of %s", k)
				require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
			}
			require.Equal(t, lost, serverSubmits(t, srv), "submits per key: the lost one, no resend")
			require.Equal(t, 1, serverHeads(t, srv), "clock probes that reached the server once it was back")
		})
	}
}

// heldAfterTheFirst reports whether b holds a request that arrived after
// its first ended.
func heldAfterTheFirst(b *blackhole) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.firstOver && b.held > 0
}
