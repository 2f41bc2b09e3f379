package idem_test

import (
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// Two replicas on one journal (pgjournal, or two Clients on one bbolt
// file: modelled by writing replica a's flag into b's journal) and a
// Solidgate payment endpoint that ignores the key ("A value of ignored
// means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), each
// payment with its order's status endpoint. Replica b starts first
// (Resume: nothing open, no endpoint known); x, sent there, and l, whose
// answer there was lost, are then journaled unknown. b's caller retries
// x with Do: its drive reads x unflagged and queries its order; while
// the query is out, replica a's Confirm flags x ReviewKeyIgnored (an
// unleased write, which no lease of b's fences) and a is killed before
// its save of the endpoint commits, the flag its only trace. The
// query's settling write, on the record read fresh, cleared the flag
// (made it ReviewMaybeTwice after two sends) without journaling the
// endpoint, and the next process resent l under the same key: a second
// charge. The drive now writes nothing over a flag it did not read,
// reads again, journals the endpoint, and then settles x.
func TestResultQueryOfAKeyIgnoredFlagSetWhileItRanJournalsTheEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sends  int
		review string // x's, settled
	}{
		{"sent once", 1, ""},
		{"sent twice", 2, idem.ReviewMaybeTwice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, ignoredCreated)
			charge, orders := s.srv.URL+"/api/v1/charge", s.srv.URL+"/api/v1/orders"
			path := filepath.Join(t.TempDir(), "idem.journal")
			js, err := journal.Open(path)
			require.NoError(t, err)
			b, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()))
			require.NoError(t, err)
			_, err = b.Resume(t.Context())
			require.NoError(t, err)

			journalSent(t, js, "x", "", charge, orders, tc.sends)
			journalSentOnce(t, js, "l", "", charge, orders)
			var flags atomic.Int32
			s.result = func(n int, w http.ResponseWriter) {
				if n == 1 { // x's order, queried by b's drive
					// Replica a's Confirm (markIgnoredBeforeConfirm).
					if flagAsReplicaA(t, js, "x") {
						flags.Add(1)
					}
					orderStatus("pay_x", "settled")(w)
					return
				}
				orderNotFound(w)
			}

			_, err = b.Do(t.Context(), &idem.Operation{Key: "x"})
			require.NoError(t, err)
			require.Equal(t, int32(1), flags.Load(), "a's flag committed while b's query was out")
			x, err := b.Lookup(t.Context(), "", "x")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, x.State, "x settled by its query")
			require.Equal(t, tc.review, x.Review, "x's review")
			closeAndResumeKnowingTheEndpoint(t, s, b, js, path)
		})
	}
}

// flagAsReplicaA commits replica a's flag on key, an unleased write as
// its Confirm's (markIgnoredBeforeConfirm) is, and reports whether it
// committed.
func flagAsReplicaA(t *testing.T, js *journal.Store, key string) bool {
	_, err := js.Update(t.Context(), idem.DefaultScope, key, func(r *journal.Record) error {
		r.Review = idem.ReviewKeyIgnored
		return nil
	})
	return err == nil
}

// As above, with the flag set while b's first send of x was out: replica
// a's walk of the endpoint's open operations (flagSentTo) flags x, sent,
// and a is killed before its save of the endpoint commits. The endpoint
// answers x with a decline that carries no Idempotency-Status (modelled:
// a validation error from the gateway in front of it), so b learns
// nothing from it, and the send's settling write (submitEnd's) settles x
// failed over the flag. Cleared unjournaled, the next process resent l.
func TestSendOfAKeyIgnoredFlagSetWhileItRanJournalsTheEndpoint(t *testing.T) {
	var js *journal.Store
	var flags atomic.Int32
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 1 && flagAsReplicaA(t, js, "x") {
			flags.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"error":{"code":"2.01","messages":["card declined"]}}`))
	})
	charge, orders := s.srv.URL+"/api/v1/charge", s.srv.URL+"/api/v1/orders"
	path := filepath.Join(t.TempDir(), "idem.journal")
	var err error
	js, err = journal.Open(path)
	require.NoError(t, err)
	b, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	_, err = b.Resume(t.Context())
	require.NoError(t, err)
	journalSentOnce(t, js, "l", "", charge, orders)

	_, _ = b.Submit(t.Context(), idem.Request{Key: "x", URL: charge, ResultURL: orders + "/x", Body: []byte(`{"amount":5,"order_id":"x"}`)})
	require.Equal(t, []string{"x"}, s.charged(), "sends: x's one")
	require.Equal(t, int32(1), flags.Load(), "a's flag committed while b's send was out")
	x, err := b.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, x.State, "x settled by its decline")
	s.mu.Lock()
	s.keys = nil // x's send, a decline: no charge
	s.mu.Unlock()
	closeAndResumeKnowingTheEndpoint(t, s, b, js, path)
}
