package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
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

// The Azure REST API Guidelines let a service compare a UUID its customer
// passed without regard to case ("a UUID path segment of 'c55f6b35-…'
// should be treated identical to 'C55F6B35-…'", azure/Guidelines.md,
// http-url-case-sensitivity); one that parses the Operation-Id as a UUID
// writes it back in its own form, lower case (modelled). The monitor of
// the key's operation then names it so, and its "Canceled" read as
// another resource's settled succeeded, the work never done.
func TestStatusMonitorCanceledNamesTheKeyInItsOwnCase(t *testing.T) {
	const key = "0190F3A2-7C4D-7E1B-9A2F-3C5D7E9B1A24"
	lower := strings.ToLower(key)
	s := &lroService{started: map[string]bool{}, initial: http.StatusAccepted, running: "Running",
		finished: `{"id":"` + lower + `","status":"Canceled"}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Operation-Id", strings.ToLower(r.Header.Get("Operation-Id")))
		r.URL.Path = strings.ToLower(r.URL.Path)
		s.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Operation-Id", idem.KeyBare),
		idem.WithResultEndpoint("/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/documents:analyze", Body: []byte(`{"source":"doc-1"}`)})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Empty(t, res.Review)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{"Running", "Running", "end"}, s.polled, "polled until the final word")
	require.Equal(t, []string{lower}, s.submits, "operations started")
}

// A UUID key is named in any form a UUID is written in; any other key
// only as it is: a resource whose id merely resembles it is no monitor of
// the key's operation.
func TestDecodeJSONCanceledOperationOfAUUIDKey(t *testing.T) {
	const key = "0190F3A2-7C4D-7E1B-9A2F-3C5D7E9B1A24"
	for _, tc := range []struct {
		key, body string
		want      idem.State
	}{
		{key, `{"id":"0190f3a2-7c4d-7e1b-9a2f-3c5d7e9b1a24","status":"Canceled"}`, idem.StateFailed},
		{key, `{"id":"0190f3a27c4d7e1b9a2f3c5d7e9b1a24","status":"Canceled"}`, idem.StateFailed},
		{key, `{"id":"0190f3a2-7c4d-7e1b-9a2f-3c5d7e9b1a25","status":"Canceled"}`, idem.StateSucceeded},
		{"Order-7", `{"id":"order-7","status":"Canceled"}`, idem.StateSucceeded},
	} {
		out, err := idem.DecodeJSON(&idem.Answer{Key: tc.key, StatusCode: http.StatusOK, Body: []byte(tc.body), Query: true})
		require.NoError(t, err, tc.body)
		require.Equal(t, tc.want, out.State, "key %s: %s", tc.key, tc.body)
	}
}
