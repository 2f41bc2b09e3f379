package idem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The Azure REST API Guidelines' status monitor ends "Succeeded",
// "Failed" or "Canceled", its "error" given only "when status is
// 'Failed'" (github.com/microsoft/api-guidelines, azure/Guidelines.md,
// lro-status-monitor-structure), and its "id" is the one the client
// passed as Operation-Id: here idem's key. azure-core's pollers take
// "Canceled" for a failed operation (azure/core/polling/base_polling.py:
// _FAILED = frozenset(["canceled", "failed"])). Read as a plain
// resource's "canceled" (a payment made, then cancelled), the canceled
// operation settled succeeded, its work never done, and a 202 saying so
// stayed processing. The monitor of the key's own operation saying
// "Canceled" settles failed, as its "Failed" does; polled to the end,
// started once.
func TestStatusMonitorCanceledIsNotSucceeded(t *testing.T) {
	s := &lroService{started: map[string]bool{}, initial: http.StatusAccepted, running: "Running",
		finished: `{"id":"k","status":"Canceled","createdDateTime":"2026-11-29T12:00:00Z"}`}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Operation-Id", idem.KeyBare),
		idem.WithResultEndpoint("/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/documents:analyze", Body: []byte(`{"source":"doc-1"}`)})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Contains(t, res.Reason, "Canceled")
	require.Empty(t, res.Review)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{"Running", "Running", "end"}, s.polled, "polled until the final word")
	require.Len(t, s.started, 1, "operations started")
	require.Equal(t, []string{"k"}, s.submits, "submits' Operation-Id")
}

// A monitor read without a query: DecodeJSON's reading of the key's own
// operation "Canceled", whatever the status code, beside a resource's
// "canceled", which stays the resource made.
func TestDecodeJSONCanceledOperationOfTheKey(t *testing.T) {
	for _, tc := range []struct {
		body   string
		status int
		want   idem.State
	}{
		{`{"id":"k","status":"Canceled"}`, http.StatusOK, idem.StateFailed},
		{`{"id":"k","status":"Canceled"}`, http.StatusAccepted, idem.StateFailed},
		{`{"id":"k","status":" cancelled "}`, http.StatusOK, idem.StateFailed},
		{`{"id":"pay_1","status":"Canceled"}`, http.StatusOK, idem.StateSucceeded},
		{`{"id":"pay_1","status":"canceled"}`, http.StatusCreated, idem.StateSucceeded},
	} {
		out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: tc.status, Body: []byte(tc.body), Query: true})
		require.NoError(t, err, tc.body)
		require.Equal(t, tc.want, out.State, "%d %s", tc.status, tc.body)
	}
}
