package idem_test

import (
	"fmt"
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

// dedupAfterIncident is a Solidgate payment endpoint learnt wrongly as
// ignoring the key. Solidgate says so per endpoint ("Idempotency support
// varies by endpoint. [...] A value of ignored means the endpoint does
// not", https://api-docs.solidgate.com/api/v2/idempotent-requests), and
// its first answer here said Idempotency-Status: ignored during an
// incident (modelled: a provider's incident, or a proxy that added the
// header). The endpoint de-duplicates by the key all the same (modelled on
// the same page's idempotent endpoints): a request under a key it has seen
// gets the payment that key made, nothing charged again. The requests
// whose number is in lose charge and lose their answer.
type dedupAfterIncident struct {
	srv  *httptest.Server
	lose map[int]bool

	mu       sync.Mutex
	keys     []string          // the Idempotency-Key of each request, in order
	payments map[string]string // key -> the payment it charged
}

func newDedupAfterIncident(t testing.TB, lose ...int) *dedupAfterIncident {
	s := &dedupAfterIncident{lose: map[int]bool{}, payments: map[string]string{}}
	for _, n := range lose {
		s.lose[n] = true
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.keys = append(s.keys, key)
		n := len(s.keys)
		pay, replay := s.payments[key]
		if !replay {
			pay = fmt.Sprintf("pay_%d", len(s.payments)+1)
			s.payments[key] = pay
		}
		s.mu.Unlock()
		if s.lose[n] {
			dropConnection(w)
			return
		}
		answerPayment(w, pay, n == 1, replay) // n == 1: the incident
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// answerPayment answers payment pay: 201, or 200 for a replay of the
// key's stored answer; marked Idempotency-Status: ignored if ignored.
func answerPayment(w http.ResponseWriter, pay string, ignored, replay bool) {
	status := http.StatusCreated
	switch {
	case ignored:
		w.Header().Set("Idempotency-Status", "ignored")
	case replay:
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"id":%q,"status":"settled"}`, pay)
}

func (s *dedupAfterIncident) requireSeen(t testing.TB, keys []string, charges int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, keys, s.keys, "requests, by the key each carried")
	require.Len(t, s.payments, charges, "charges")
}

// An endpoint learnt wrongly as ignoring the key (its first answer, k1's
// 201, marked ignored) had every later payment there whose answer was
// lost flagged for review, never resent, for as long as the process ran:
// removing it from the journal did not reach the running Client's memory.
// ForgetKeyIgnoring removes it from both, so that k2, whose first answer
// is lost, is resent under the same key, which the endpoint answers with
// k2's payment: requests k1, k2, k2; two charges; k2 succeeded, 2
// attempts, unflagged. Without it, k2 is flagged (requests k1, k2).
func TestForgetKeyIgnoringResendsUnderTheSameKey(t *testing.T) {
	for _, tt := range []struct {
		name   string
		forget bool
	}{{"forgotten", true}, {"not forgotten", false}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newDedupAfterIncident(t, 2)
			c := clientFor(t, s.srv, idemtest.NewClock(epoch))
			charge := s.srv.URL + "/api/v1/charge"
			endpoint := "POST " + charge

			res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
			require.NoError(t, err, "Submit(k1)")
			require.Equal(t, "pay_1", res.ResourceID)
			got, err := c.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, err, "KeyIgnoringEndpoints()")
			require.Equal(t, []string{endpoint}, got, "KeyIgnoringEndpoints(): learnt from k1's answer")

			if tt.forget {
				known, err := c.ForgetKeyIgnoring(t.Context(), endpoint)
				require.NoError(t, err, "ForgetKeyIgnoring()")
				require.True(t, known, "ForgetKeyIgnoring(): known")
				got, err = c.KeyIgnoringEndpoints(t.Context())
				require.NoError(t, err)
				require.Empty(t, got, "KeyIgnoringEndpoints() after ForgetKeyIgnoring()")
				kept, err := c.Store().(*journal.Store).KeyIgnoringEndpoints(t.Context())
				require.NoError(t, err)
				require.Empty(t, kept, "journal: endpoints after ForgetKeyIgnoring()")
				known, err = c.ForgetKeyIgnoring(t.Context(), endpoint)
				require.NoError(t, err, "ForgetKeyIgnoring() again")
				require.False(t, known, "ForgetKeyIgnoring() again: unknown")
			}

			res, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":100}`)})
			op, lerr := c.Lookup(t.Context(), "", "k2")
			require.NoError(t, lerr)
			if !tt.forget {
				require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k2)")
				s.requireSeen(t, []string{"k1", "k2"}, 2)
				require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k2's Review")
				require.Equal(t, idem.StateUnknown, op.State, "journal: k2's State")
				require.Equal(t, 1, op.Attempts, "journal: k2's attempts")
				return
			}
			require.NoError(t, err, "Submit(k2)")
			require.Equal(t, "pay_2", res.ResourceID)
			s.requireSeen(t, []string{"k1", "k2", "k2"}, 2)
			require.Equal(t, idem.StateSucceeded, op.State, "journal: k2's State")
			require.Empty(t, op.Review, "journal: k2's Review")
			require.Equal(t, 2, op.Attempts, "journal: k2's attempts")
		})
	}
}

// The endpoint removed from the journal through a handle of its own (what
// idem key-ignoring remove does on a pgjournal, or journal.Store's
// RemoveKeyIgnoring) is kept by the running Client, which learnt it: k2,
// whose answer is lost, is flagged, not resent (requests k1, k2). A
// restart reads the journal without it, and k3, whose answer is lost
// too, is resent under its key (requests k1, k2, k3, k3) once k2 is
// resolved (which journals the endpoint again, k2's flag perhaps its one
// trace: removed again after it); while k2 is open and flagged, the
// restarted process learns the endpoint from it again and k3 is flagged
// (k1, k2, k3).
func TestKeyIgnoringRemovedFromTheJournalKeptUntilRestart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		resolve bool // k2 is resolved before the restart
		keys    []string
	}{
		{"flagged operation resolved", true, []string{"k1", "k2", "k3", "k3"}},
		{"flagged operation left open", false, []string{"k1", "k2", "k3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newDedupAfterIncident(t, 2, 3)
			open := reopenable(t, s.srv)
			charge := s.srv.URL + "/api/v1/charge"
			endpoint := "POST " + charge

			c, store := open()
			_, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
			require.NoError(t, err, "Submit(k1)")
			// Journaled beside the call (saveIgnoring): wait for it.
			require.Eventually(t, func() bool {
				kept, err := store.KeyIgnoringEndpoints(t.Context())
				return err == nil && len(kept) == 1
			}, 10*time.Second, time.Millisecond, "journal: k1's endpoint journaled")
			removed, err := store.RemoveKeyIgnoring(t.Context(), endpoint)
			require.NoError(t, err, "RemoveKeyIgnoring()")
			require.True(t, removed, "RemoveKeyIgnoring()")

			res, err := c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":100}`)})
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k2): the running Client keeps the endpoint")
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			s.requireSeen(t, []string{"k1", "k2"}, 2)
			got, err := c.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, err)
			require.Equal(t, []string{endpoint}, got, "KeyIgnoringEndpoints(): kept in memory")
			if tt.resolve {
				_, err = c.Resolve(t.Context(), "", "k2", idem.Resolution{State: idem.StateSucceeded, ResourceID: "pay_2",
					Reason: "one charge in the dashboard", By: "ops"})
				require.NoError(t, err, "Resolve(k2)")
				// k2's flag may have been all that told of the endpoint
				// (its save failed): Resolve journaled it again first.
				kept, err := store.KeyIgnoringEndpoints(t.Context())
				require.NoError(t, err)
				require.Equal(t, []string{endpoint}, kept, "journal: endpoints after Resolve(k2)")
				removed, err := store.RemoveKeyIgnoring(t.Context(), endpoint)
				require.NoError(t, err, "RemoveKeyIgnoring() after Resolve(k2)")
				require.True(t, removed, "RemoveKeyIgnoring() after Resolve(k2)")
			}
			require.NoError(t, c.Close())
			require.NoError(t, store.Close())

			c, store = open() // the restart
			res, err = c.Submit(t.Context(), idem.Request{Key: "k3", URL: charge, Body: []byte(`{"amount":300}`)})
			s.requireSeen(t, tt.keys, 3)
			op, lerr := c.Lookup(t.Context(), "", "k3")
			require.NoError(t, lerr)
			require.NoError(t, c.Close()) // waits for a journaling of the endpoint relearnt
			kept, kerr := store.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, kerr)
			if tt.resolve {
				require.NoError(t, err, "Submit(k3)")
				require.Equal(t, "pay_3", res.ResourceID)
				require.Equal(t, idem.StateSucceeded, op.State, "journal: k3's State")
				require.Equal(t, 2, op.Attempts, "journal: k3's attempts")
				require.Empty(t, kept, "journal: endpoints")
				return
			}
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k3): learnt again from k2, open and flagged")
			require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k3's Review")
			require.Equal(t, 1, op.Attempts, "journal: k3's attempts")
			require.Equal(t, []string{endpoint}, kept, "journal: endpoints: journaled again from k2")
		})
	}
}

// reopenable returns what opens a Client for srv on one journal file,
// again after each restart: both closed when the test ends.
func reopenable(t *testing.T, srv *httptest.Server) func() (*idem.Client, *journal.Store) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	return func() (*idem.Client, *journal.Store) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = store.Close() })
		return c, store
	}
}
