package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// heldCharges is a payment API keyed by Idempotency-Key, as Stripe's is
// (https://docs.stripe.com/api/idempotent_requests: a repeated key
// replays the first answer, nothing charged again). Its first request's
// answer is lost after the charge (the connection drops); every later
// request is held until release is closed, as a slow provider holds a
// resend, then answered with the charge.
type heldCharges struct {
	mu      sync.Mutex
	charges map[string]int
	keys    []string
	arrived chan struct{}
	release chan struct{}
}

func newHeldCharges(t *testing.T) (*heldCharges, *httptest.Server) {
	h := &heldCharges{charges: map[string]int{}, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.let)
	return h, srv
}

func (h *heldCharges) let() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *heldCharges) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	h.mu.Lock()
	h.keys = append(h.keys, key)
	first := h.charges[key] == 0
	if first {
		h.charges[key] = 1
	}
	h.mu.Unlock()
	if first {
		panic(http.ErrAbortHandler) // charged; the answer is lost
	}
	h.arrived <- struct{}{}
	<-h.release
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": "ch_1", "status": "succeeded"})
}

func (h *heldCharges) counts() (charges int, keys []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.charges {
		charges += n
	}
	return charges, append([]string(nil), h.keys...)
}

// chargeHeldInFlight starts a Submit of "k" at default settings whose resend
// the server holds, and waits until it is on the wire.
func chargeHeldInFlight(t *testing.T) (*heldCharges, *journal.Store, *fixture, <-chan error) {
	t.Helper()
	h, srv := newHeldCharges(t)
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	c, err := idem.New(js, idem.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	a := httptest.NewServer(admin.NewHandler(c))
	t.Cleanup(a.Close)

	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(context.Background(), idem.Request{Key: "k", URL: srv.URL + "/v1/charges", Body: []byte(`{"amount":500}`)})
		done <- err
	}()
	select {
	case <-h.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the resend never reached the server")
	}
	return h, js, &fixture{t: t, admin: a}, done
}

func waitDrive(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the drive never ended")
		return nil
	}
}

// An operator sees nothing in the provider's dashboard and resolves the
// operation "failed" while its resend is on the wire. Resolve took no
// lease: "failed" was written, the customer paid again under a new key,
// and the held resend executed too, 2 charges. The resolution is now
// refused, nothing written; the drive settles succeeded, 1 charge.
func TestAdminResolveRefusedDuringInFlightSend(t *testing.T) {
	h, js, f, done := chargeHeldInFlight(t)

	var resp struct{ Error *admin.Error }
	body := `{"key":"k","state":"failed","reason":"not in the dashboard","by":"alice"}`
	require.Equal(t, http.StatusConflict, f.do(http.MethodPost, "/resolve", body, &resp), "POST /resolve during the send")
	require.Contains(t, resp.Error.Message, "may be on the wire")
	rec, err := js.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.True(t, rec.Open(), "state %s: nothing written", rec.State)
	require.Nil(t, rec.Resolved)

	h.let()
	require.NoError(t, waitDrive(t, done))
	rec, err = js.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.Nil(t, rec.Resolved)
	charges, keys := h.counts()
	require.Equal(t, 1, charges)
	require.Len(t, keys, 2)
	require.Equal(t, keys[0], keys[1], "the resend reused the key")
}

// With force the operator's "failed" is written during the send, and the
// late answer, a charge, flags it for review rather than being dropped.
func TestAdminResolveForcedDuringInFlightSendFlagsLateAnswer(t *testing.T) {
	h, js, f, done := chargeHeldInFlight(t)

	body := `{"key":"k","state":"failed","reason":"not in the dashboard","by":"alice","force":true}`
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, nil), "POST /resolve with force")
	rec, err := js.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, rec.State)

	h.let()
	require.ErrorIs(t, waitDrive(t, done), idem.ErrNeedsReview)
	rec, err = js.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, rec.State, "the resolution is kept")
	require.Equal(t, journal.ReviewConfirmConflict, rec.Review)
	charges, _ := h.counts()
	require.Equal(t, 1, charges)
}

// Another replica on the journal drives "k" (its live lease): the
// resolution is refused, nothing written, the error naming the holder
// and until when; once the lease ends, it is written, and the replica's
// next write is refused (fenced).
func TestAdminResolveRefusedUnderAnotherOwnersLease(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv, js := serverAndJournal(t, clock)
	c, err := idem.New(js, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock),
		idem.WithResultEndpoint(srv.ResultTemplate()), idem.WithLease("replica-a", idem.DefaultLeaseDuration))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k", Count: 1000}))
	_, err = c.Submit(context.Background(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	// replica-b's Run visit resends it: its lease is live.
	_, lease, err := js.Claim(context.Background(), idem.DefaultScope, "k", "replica-b", clock.Now(), clock.Now().Add(idem.DefaultLeaseDuration))
	require.NoError(t, err)

	h := httptest.NewServer(admin.NewHandler(c, admin.WithClock(clock)))
	t.Cleanup(h.Close)
	f := &fixture{t: t, admin: h}
	var resp struct{ Error *admin.Error }
	body := `{"key":"k","state":"failed","reason":"not in the dashboard","by":"alice"}`
	require.Equal(t, http.StatusConflict, f.do(http.MethodPost, "/resolve", body, &resp))
	require.Contains(t, resp.Error.Message, "replica-b")
	require.Contains(t, resp.Error.Message, lease.Expires.UTC().Format(time.RFC3339))
	rec, err := js.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.True(t, rec.Open(), "state %s: nothing written", rec.State)
	require.Nil(t, rec.Resolved)

	clock.Advance(idem.DefaultLeaseDuration + time.Second)
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, nil), "POST /resolve once the lease ended")
	rec, err = js.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, rec.State)
	_, err = js.Update(journal.WithLease(context.Background(), lease), idem.DefaultScope, "k", func(*journal.Record) error { return nil })
	require.ErrorIs(t, err, journal.ErrLeaseLost, "replica-b's write after the resolution")
	require.False(t, strings.Contains(resp.Error.Message, "PLANTED"))
}
