package idem_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// meshOrigin is an orders service that de-duplicates by key as Stripe
// does (a key still in flight answers 409, a finished one replays its
// stored answer, unmarked as Adyen and most servers replay), behind a
// sidecar with Istio's default retry policy: a 503 from the upstream is
// retried, POST or not (retriable_status_codes 503, istio/istio#13851;
// the double payout of #50506). The first copy of the first submit
// commits its order, and the sidecar hears 503 (the pod's connection
// reset) while the copy is still running: its retry of the same request
// finds the key in flight, and the 409 is all the client hears.
type meshOrigin struct {
	mu       sync.Mutex
	orders   int
	copies   int      // submits that reached the service
	keys     []string // the key of each
	inFlight map[string]bool
	stored   map[string]string
}

func (o *meshOrigin) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	o.mu.Lock()
	defer o.mu.Unlock()
	o.copies++
	o.keys = append(o.keys, key)
	switch {
	case o.stored[key] != "":
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, o.stored[key])
	case o.inFlight[key]:
		// The first copy finishes once this answer is out.
		o.inFlight[key] = false
		o.stored[key] = `{"id":"ord_1","status":"succeeded"}`
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":{"type":"idempotency_error","message":"There is currently another in-progress request using this Idempotent Key `+
			`(that probably means you submitted twice, and the other request is still going through). Please try again later."}}`)
	default:
		o.orders++
		o.inFlight[key] = true
		podReset(w)
	}
}

// newMeshOrigin starts a meshOrigin behind its retrying sidecar; requests
// go to the sidecar.
func newMeshOrigin(t testing.TB) (*meshOrigin, *httptest.Server) {
	t.Helper()
	o := &meshOrigin{inFlight: map[string]bool{}, stored: map[string]string{}}
	return o, retryingSidecar(t, o.serve)
}

// podReset is Envoy's 503 to a request whose connection to the pod reset
// before the answer's headers: the answer retryingSidecar retries.
func podReset(w http.ResponseWriter) {
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
}

// retryingSidecar starts origin behind a sidecar with Istio's default
// retry policy: an upstream 503 is retried twice, whatever the method
// (retriable_status_codes 503, istio/istio#13851), the same bytes and
// headers each time. Requests go to the sidecar it returns.
func retryingSidecar(t testing.TB, origin http.HandlerFunc) *httptest.Server {
	t.Helper()
	upstream := httptest.NewServer(origin)
	t.Cleanup(upstream.Close)
	sidecar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var resp *http.Response
		for try := 0; try < 3; try++ { // Istio's default: 2 retries
			req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream.URL+r.URL.RequestURI(), bytes.NewReader(body))
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			req.Header = r.Header.Clone()
			if resp, err = upstream.Client().Do(req); err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				break
			}
			_ = resp.Body.Close()
		}
		defer resp.Body.Close()
		for name, vs := range resp.Header {
			w.Header()[name] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(sidecar.Close)
	return sidecar
}

// A 409 to an operation's first attempt is read as another request
// holding the key, and an unmarked 2xx after it as the server's answer to
// ours (decide_test.go's TestContestedKey). Behind a retrying mesh the
// request holding the key is ours, sent twice by the sidecar: its stored
// order is ours, and settling it is right. Flagging such a 2xx for a
// person (as a marked replay after the 409 is) would ask one about every
// order a sidecar's retry ran into, to catch only a key reused for
// another request on a server that neither compares bodies nor marks
// replays, whose silent replay to a first attempt idem takes as ours
// anyway.
func TestMeshRetryInFlightThenStoredOrderIsOurs(t *testing.T) {
	o, sidecar := newMeshOrigin(t)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: sidecar.URL + "/v1/orders", Body: chargeBody})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "ord_1", res.ResourceID)
	require.Empty(t, res.Review)
	require.Equal(t, 2, res.Attempts, "the 409, then the stored order")
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Equal(t, 1, o.orders, "orders")
	require.Equal(t, 3, o.copies, "copies reaching the service: the sidecar's two, then the resend")
	require.Equal(t, []string{"k", "k", "k"}, o.keys)
}

// The order a sidecar's retry committed (the 409 to the first attempt is
// ours, meshOrigin) is under the key from its first send, and the server
// forgets the key as Stripe does, once "at least 24 hours old"
// (docs.stripe.com/api/idempotent_requests). The replica that resumes it
// after an outage has a clock three minutes slow: a minute after the
// server forgot the key, it reads the key as 23 h 58 min someone else's.
// Resent, it is a second order; KeyWindowMargin is left here too, and
// the operation goes to a person.
func TestMeshRetryInFlightKeyWindowMarginCoversSlowReplicaClock(t *testing.T) {
	o, sidecar := newMeshOrigin(t)
	clock := idemtest.NewClock(epoch)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	// The replica that sent it stops after the 409 (one attempt).
	first, err := idem.New(store, idem.WithHTTPClient(sidecar.Client()), idem.WithClock(clock), idem.WithMaxAttempts(1))
	require.NoError(t, err)
	_, err = first.Submit(t.Context(), idem.Request{Key: "k", URL: sidecar.URL + "/v1/orders", Body: chargeBody})
	require.Error(t, err)
	require.NoError(t, first.Close())

	clock.Advance(idem.KeyRetentionStripe + time.Minute)
	o.mu.Lock()
	clear(o.stored) // the server's window has passed
	o.mu.Unlock()
	sum := resumeOnSlowReplica(t, store, sidecar.Client(), clock)
	require.Equal(t, 1, sum.Review)
	o.mu.Lock()
	require.Equal(t, 1, o.orders, "orders: resent on a key the server forgot")
	require.Equal(t, []string{"k", "k"}, o.keys, "copies reaching the service: the sidecar's two, no resend")
	o.mu.Unlock()
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.True(t, rec.Open())
	require.Equal(t, idem.ReviewKeyInUse, rec.Review)
}
