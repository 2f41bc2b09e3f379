package idem_test

import (
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// refusedHead is a host restarting as the client starts (modelled on a
// server process not yet listening on its port): the first request, a
// clock probe, is held until release, then refused at once
// (ECONNREFUSED, nothing sent); the host is back for every later one.
type refusedHead struct {
	base    http.RoundTripper
	entered chan struct{}
	release chan struct{}
	heads   int // read after release
}

func (h *refusedHead) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodHead && h.heads == 0 {
		h.heads++
		h.entered <- struct{}{}
		<-h.release
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return h.base.RoundTrip(r)
}

// A caller's Do of an order an earlier process sent, whose answer was
// lost, joined to Resume's visit of it at start-up (a client retrying
// with the same draft id while the service starts), got the visit's
// hand-off at once: the visit's clock probe was refused by the host
// restarting, and Resume hands such a visit off without a backoff
// (refusedProbe), where the caller's own drive waits its backoff and
// asks the host's clock again. The host is back by then, and its Date
// finds the key inside its window: "Subsequent requests with the same
// key return the same result" (docs.stripe.com/idempotency), and the
// resend settles it. The caller got ErrUnknownOutcome after no send of
// its own, its budget ("Do drives until it settles or the call's budget
// is spent") untouched. Default settings but the clock.
func TestForegroundJoinerOfRefusedProbeVisitKeepsItsBudget(t *testing.T) {
	clock, srv, path, keys := stripeBacklog(t, "old", 1)
	clock.Advance(5 * time.Minute)
	network := &refusedHead{base: srv.Client().Transport, entered: make(chan struct{}, 1), release: make(chan struct{})}
	_, c := openOn(t, path, network, clock)

	resumed := make(chan error, 1)
	go func() {
		_, err := c.Resume(t.Context())
		resumed <- err
	}()
	select {
	case <-network.entered: // Resume's visit asks the host's clock
	case <-time.After(time.Minute):
		t.Fatal("Resume never asked the host's clock")
	}
	op, err := c.Lookup(t.Context(), idem.DefaultScope, keys[0])
	require.NoError(t, err)
	done := make(chan callResult, 1)
	go func() {
		res, err := c.Do(t.Context(), op)
		done <- callResult{res, err}
	}()
	waitJoined(t, 1)
	close(network.release)
	require.NoError(t, within(t, resumed, "Resume"))
	got := within(t, done, "Do")

	require.NoError(t, got.err, "Do returned Resume's hand-off")
	require.Equal(t, idem.StateSucceeded, got.res.State)
	require.Equal(t, 1, network.heads, "clock probes refused")
	require.Equal(t, 1, serverHeads(t, srv), "clock probes that reached the server")
	require.Equal(t, map[string]int{keys[0]: 2}, serverSubmits(t, srv), "submits per key: the lost one, the resend")
	require.Equal(t, 1, srv.Effects("", keys[0]), "orders for old00")
}
