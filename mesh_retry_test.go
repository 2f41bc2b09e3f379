package idem_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
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
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
	}
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
	o := &meshOrigin{inFlight: map[string]bool{}, stored: map[string]string{}}
	origin := httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(origin.Close)
	sidecar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var resp *http.Response
		for try := 0; try < 3; try++ { // Istio's default: 2 retries
			req, err := http.NewRequestWithContext(r.Context(), r.Method, origin.URL+r.URL.RequestURI(), bytes.NewReader(body))
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			req.Header = r.Header.Clone()
			if resp, err = origin.Client().Do(req); err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				break
			}
			_ = resp.Body.Close()
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(sidecar.Close)
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
