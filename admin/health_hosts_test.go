package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// refuseAll refuses every connection, as a host that is down does.
type refuseAll struct{}

func (refuseAll) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return nil, errors.New("dial tcp: connection refused")
}

// GET /health names a host Run cannot reach, with since when and how
// many visits in a row failed, and still answers 200: a payment API down
// is not this service down (a probe restarting it would help no one).
func TestHealthNamesHostsRunCannotReach(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: refuseAll{}}), idem.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: "http://payments.example:8443/orders", Body: []byte(`{"amount":1}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	srv := httptest.NewServer(admin.NewHandler(c))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var h admin.Health
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := srv.Client().Get(srv.URL + "/health")
		require.NoError(t, err)
		h = admin.Health{}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
		_ = resp.Body.Close()
		if len(h.Hosts) > 0 {
			require.Equal(t, http.StatusOK, resp.StatusCode)
			break
		}
		require.True(t, time.Now().Before(deadline), "no host in /health after 10s: %+v", h)
		time.Sleep(time.Millisecond) // polling interval, not a condition
	}
	require.True(t, h.OK)
	require.Len(t, h.Hosts, 1)
	require.Equal(t, "payments.example:8443", h.Hosts[0].Host)
	require.GreaterOrEqual(t, h.Hosts[0].FailedVisits, 1)
	require.NotNil(t, h.Hosts[0].FailingSince)
	require.NotNil(t, h.Hosts[0].LastFailedVisit)
	require.Nil(t, h.Hosts[0].RestUntil)
	require.Zero(t, h.HostsOmitted)
}
