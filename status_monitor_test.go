package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// lroService runs long-running operations as the Azure REST API
// Guidelines have them (github.com/microsoft/api-guidelines,
// azure/Guidelines.md, "Long-Running Operations & Jobs"): the client
// names the operation with an Operation-Id header, which is also what
// makes a retry idempotent; the service answers with a status monitor,
// {"id": the operation's id, "status": "NotStarted", "Running",
// "Succeeded", "Failed" or "Canceled"}, and GET
// <operation-endpoint>/<operation-id> answers the monitor with 200 OK
// while the operation is still running. ARM's Azure-AsyncOperation
// monitor says "InProgress". Every operation fails after its polls.
type lroService struct {
	mu       sync.Mutex
	started  map[string]bool
	submits  []string // the Operation-Id of each
	polls    int
	running  string // the monitor's status while it runs
	initial  int    // the status of the answer that starts it
	polled   []string
	finished string // the monitor at the end
}

func (s *lroService) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet {
		id := strings.TrimPrefix(r.URL.Path, "/operations/")
		s.polls++
		if s.polls <= 2 {
			w.Header().Set("Retry-After", "1")
			_, _ = fmt.Fprintf(w, `{"id":%q,"status":%q,"createdDateTime":"2026-11-29T12:00:00Z"}`, id, s.running)
			s.polled = append(s.polled, s.running)
			return
		}
		_, _ = io.WriteString(w, s.finished)
		s.polled = append(s.polled, "end")
		return
	}
	id := r.Header.Get("Operation-Id")
	s.submits = append(s.submits, id)
	s.started[id] = true
	w.Header().Set("Operation-Location", "http://"+r.Host+"/operations/"+id)
	w.WriteHeader(s.initial)
	_, _ = fmt.Fprintf(w, `{"id":%q,"status":"NotStarted"}`, id)
}

// A status monitor's "NotStarted", "Running" or "InProgress" says the
// operation has not finished: it was read as a plain resource created, so
// the first poll (or a 201 that started the operation) settled it
// succeeded, and the operation failed after. Now they are read as a
// 202's body is: processing, polled again, settled only by a final word.
func TestStatusMonitorStillRunningIsNotSucceeded(t *testing.T) {
	failed := `{"id":"k","status":"Failed","error":{"code":"InternalServerError","message":"The analysis failed."}}`
	for _, tc := range []struct {
		name     string
		initial  int
		running  string
		finished string
		want     idem.State
	}{
		{name: "POST action, 202, Running, then Failed", initial: http.StatusAccepted, running: "Running", finished: failed},
		{name: "PUT to the operation endpoint, 201, Running, then Failed", initial: http.StatusCreated, running: "Running", finished: failed},
		{name: "ARM InProgress, then Failed", initial: http.StatusAccepted, running: "InProgress", finished: failed},
		{name: "Running, then Succeeded", initial: http.StatusAccepted, running: "Running",
			finished: `{"id":"k","status":"Succeeded","result":{"pages":3}}`, want: idem.StateSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &lroService{started: map[string]bool{}, initial: tc.initial, running: tc.running, finished: tc.finished}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Operation-Id", idem.KeyBare),
				idem.WithResultEndpoint("/operations/{key}"))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/documents:analyze", Body: []byte(`{"source":"doc-1"}`)})
			s.mu.Lock()
			defer s.mu.Unlock()
			if tc.want == idem.StateSucceeded {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
			} else {
				require.NotEqualf(t, idem.StateSucceeded, res.State, "settled while the monitor said %q; polls %v", tc.running, s.polled)
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			}
			want := []string{tc.running, tc.running, "end"}
			if tc.want != idem.StateSucceeded {
				// The failed monitor carries an "error", which DecodeJSON
				// takes for no proof: asked again, never started again
				// (the service said it holds the operation).
				want = append(want, "end")
			}
			require.Equal(t, want, s.polled, "polled until the final word")
			require.Len(t, s.started, 1, "operations started")
			require.Equal(t, []string{"k"}, s.submits, "submits' Operation-Id")
		})
	}
}
