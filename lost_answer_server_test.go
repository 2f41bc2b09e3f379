package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// lostAnswerServer does the work of every POST and loses its answer (the
// connection drops), and answers a GET, the result query, with result:
// an operation's answer found only by asking for it.
type lostAnswerServer struct {
	header string // the key's header
	result string

	mu      sync.Mutex
	keys    []string // each POST's key
	made    int      // what the server did for the POSTs
	queries int
}

func (s *lostAnswerServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodPost {
		s.keys = append(s.keys, r.Header.Get(s.header))
		s.made++
		dropConnection(w)
		return
	}
	s.queries++
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, s.result)
}

// requireFoundByTheQuery submits req (its URL a path on s's server) to a
// client asking s's result endpoint, answers read by decode, and asserts
// one POST with the key, one made, one query, and then: the operation
// succeeded with resource, no person asked; or, resource "", left for a
// person as another request's (ReviewKeyInUse, ErrKeyConflict), its last
// attempt naming what differs, names.
func (s *lostAnswerServer) requireFoundByTheQuery(t *testing.T, decode idem.Decoder, req idem.Request, resource, names string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader(s.header, idem.KeyBare),
		idem.WithDecoder(decode), idem.WithResultEndpoint(srv.URL+"/results/by-key/{key}"))
	req.URL = srv.URL + req.URL

	res, err := c.Submit(t.Context(), req)
	op, lerr := c.Lookup(t.Context(), idem.DefaultScope, req.Key)
	require.NoError(t, lerr)
	if resource != "" {
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, resource, res.ResourceID)
		require.Equal(t, idem.StateSucceeded, op.State)
		require.Empty(t, op.Review)
	} else {
		requireForeignKey(t, res, err)
		requireOtherRequestsOp(t, c, op, req.Key, names)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	requireEach(t, s.keys, 1, req.Key, "post")
	require.Equal(t, 1, s.made, "made")
	require.Equal(t, 1, s.queries, "queries")
}

// requireHeldThenStored submits req (its URL a path on f's server) after
// f has made stored, the key's first request's answer (a copy of ours or
// another request's), and asserts three posts with the key, one made, and
// then: succeeded with resource; or, resource "", another request's, its
// last attempt naming what differs, names.
func (f *firstAnswerServer) requireHeldThenStored(t *testing.T, decode idem.Decoder, req idem.Request, stored, resource, names string) {
	t.Helper()
	f.busy = 2
	if f.answer == nil {
		f.answer = func(int, []byte) string { return stored }
	}
	srv, c := f.start(t, decode)
	f.stored[req.Key] = stored
	f.made = 1
	req.URL = srv.URL + req.URL
	if resource != "" {
		f.requireOursAfterTheKeyWasHeld(t, c, req, resource)
		return
	}
	res, err := c.Submit(t.Context(), req)
	requireOtherRequestsAnswer(t, c, req.Key, res, err, http.StatusOK, names)
	f.requireKeys(t, req.Key, 3, 1)
}
