package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
)

// A charge whose answers were all lost was handed off (ErrUnknownOutcome:
// "Run settles it and calls the settle func"). The API keeps no result
// endpoint by key (Stripe: an idempotency key is replayed, never looked
// up, docs.stripe.com/api/idempotent_requests; modelled by the fake
// server without WithResultEndpoint), so a person finds the charge in the
// dashboard and settles it through the running service's admin handler,
// as the README's runbook says. The application learns of handed-off work
// only from its settle func: it was never called, and the order stayed
// "payment pending" for good (charged, never shipped; or, given up on,
// paid for again under a new key). The settle func now hears of the
// resolution, once, and nothing more is sent.
func TestResolveOfHandedOffOperationReachesTheSettleFunc(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv, js := serverAndJournal(t, clock)
	var (
		mu      sync.Mutex
		settled []*idem.Result
	)
	client, err := idem.New(js, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock),
		idem.WithSettleFunc(func(r *idem.Result) {
			mu.Lock()
			defer mu.Unlock()
			settled = append(settled, r)
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "ch-lost", Count: 1000}))
	_, err = client.Submit(context.Background(), idem.Request{Key: "ch-lost", URL: srv.URL + "/orders", Body: []byte(`{"amount":1000}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() with every answer lost")
	require.Equal(t, 1, srv.Effects("", "ch-lost"), "charges before the resolution")
	sent := len(srv.Requests())

	h := httptest.NewServer(admin.NewHandler(client, admin.WithClock(clock)))
	t.Cleanup(h.Close)
	f := &fixture{t: t, admin: h}
	body := `{"key":"ch-lost","state":"succeeded","resource_id":"ch_1","reason":"seen in the dashboard","by":"alice"}`
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, nil), "POST /resolve")

	mu.Lock()
	got := append([]*idem.Result(nil), settled...)
	mu.Unlock()
	require.Len(t, got, 1, "settle func calls for the operation resolved by hand")
	require.Equal(t, "ch-lost", got[0].Key)
	require.Equal(t, idem.StateSucceeded, got[0].State)
	require.Equal(t, "ch_1", got[0].ResourceID)
	require.Equal(t, 1, srv.Effects("", "ch-lost"), "charges after the resolution")
	require.Len(t, srv.Requests(), sent, "requests sent after the resolution")

	// A correction of what is settled already is no handed-off work
	// settling: the settle func is not told again.
	body = `{"key":"ch-lost","state":"succeeded","resource_id":"ch_1","reason":"checked twice","by":"bob","force":true}`
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, nil), "POST /resolve with force")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, settled, 1, "settle func calls after a forced correction")
}
