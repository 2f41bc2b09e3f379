package idem_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// cutTransport fails every request for the keys in down (the connection
// died as it was written: the order may have reached the server) while
// down is set, POSTs and result queries alike.
type cutTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	down map[string]bool
}

func (d *cutTransport) set(key string, down bool) {
	d.mu.Lock()
	d.down[key] = down
	d.mu.Unlock()
}

func (d *cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	if key == "" && len(req.URL.Path) > len("/operations/") {
		key = req.URL.Path[len("/operations/"):]
	}
	d.mu.Lock()
	down := d.down[key]
	d.mu.Unlock()
	if down {
		return resetAsWritten(req)
	}
	return d.base.RoundTrip(req)
}

// A guest VM paused 35 minutes, then put right by chrony slewing its
// clock (83333 ppm, its default maxslewrate: seven hours for 35
// minutes), talking to a server keeping keys 30 minutes with a result
// endpoint (modelled, as TestKeyWindowOutlivesPausedVM). While it slews,
// the host's Date falls on ours by clockSlack every 24 seconds, a new
// frame of hostGains each: the frames filled within minutes, and the
// merges folded the pause into the frames after it, so every order sent
// after the resume whose answer was lost, minutes before, read the
// whole pause as gained and went to a person (2 of 4 flagged
// ReviewClockStepped, neither ordered), though the server, by its own clock, held each key minutes
// old. Now each is resent and ordered once, unflagged; the order sent as
// the pause began stays unknown, ordered once, flagged. At default
// settings but the clock and the result endpoint.
func TestKeyWindowSurvivesSlewAfterPausedVM(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now), idemtest.WithRetention(30*time.Minute))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	guest := &pausedGuestClock{Clock: clock, start: clock.Now()}
	lose := &losingTransport{base: srv.Client().Transport, clock: guest,
		lose: map[string]time.Duration{"paused": 35 * time.Minute}}
	tr := &cutTransport{base: lose, down: map[string]bool{}}
	c, get := guestClient(t, tr, guest, srv.URL+"/operations/{key}")
	ctx := t.Context()
	submit := func(key string) error {
		t.Helper()
		_, err := c.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
		return err
	}

	require.NoError(t, submit("before"))
	clock.Advance(time.Minute)
	require.ErrorIs(t, submit("paused"), idem.ErrNeedsReview)
	guest.slew()

	// Other orders every 30 seconds for eight minutes, their Dates a
	// frame each; four lost among them.
	var lost []string
	for i := range 16 {
		clock.Advance(30 * time.Second)
		key := fmt.Sprintf("order-%d", i)
		if i%5 == 0 {
			tr.set(key, true)
			require.ErrorIs(t, submit(key), idem.ErrUnknownOutcome)
			tr.set(key, false)
			lost = append(lost, key)
			continue
		}
		require.NoError(t, submit(key))
	}

	flagged := 0
	for _, key := range lost {
		err := submit(key)
		rec := get(key)
		if rec.Review == idem.ReviewClockStepped {
			flagged++
			continue
		}
		require.NoError(t, err, key)
		require.Equal(t, idem.StateSucceeded, rec.State, key)
		require.Equal(t, 1, srv.Effects("", key), "orders for %s, sent after the resume", key)
	}
	require.Zero(t, flagged, "orders sent after the resume flagged ReviewClockStepped, of %d", len(lost))

	rec := get("paused")
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewClockStepped, rec.Review)
	require.Equal(t, 1, srv.Effects("", "paused"), "orders for the key sent as the VM paused")
	require.ErrorIs(t, submit("paused"), idem.ErrNeedsReview)
	require.Equal(t, 1, srv.Effects("", "paused"))
}
