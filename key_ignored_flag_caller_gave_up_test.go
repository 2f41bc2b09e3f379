package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// cancelsCallerOnKeyIgnoringSave is a journal whose endpoint writes
// (AddKeyIgnoring), once armed, outlast the caller's deadline: each
// cancels the caller's context, then fails if its own context is done,
// as a database client fails a query whose context ended (pgx does).
type cancelsCallerOnKeyIgnoringSave struct {
	*journal.Store
	cancel context.CancelFunc
	armed  atomic.Bool
}

func (s *cancelsCallerOnKeyIgnoringSave) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	if s.armed.Load() {
		s.cancel()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

// Two replicas on one journal (modelled by writing replica a's flag into
// b's journal) and a Solidgate payment endpoint that ignores the key ("A
// value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), no result
// endpoint given. b's caller submits x; while its one send is out,
// replica a's walk of the endpoint's open operations flags x
// ReviewKeyIgnored and a is killed. The endpoint answers 201: x is paid,
// once, and b holds that answer. Its settling write, over a flag b did
// not read, writes nothing until b has journaled the endpoint
// (keepUnreadFlag); that journaling ran within the caller's context,
// and a caller whose deadline passed there (a slow endpoint write, or a
// wait for another save) was told only that its context ended, x left
// unknown and flagged with its 201 unjournaled: a person's time for an
// order known paid. The answer is now journaled whatever the caller
// does, as the outcome's commit is.
func TestKeyIgnoredFlagSetWhileTheSendRanSettlesTheAnswerAfterTheCallerGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(n int, w http.ResponseWriter)
	}{
		// b learns the endpoint from the answer and journals it; the
		// endpoint is journaled again for the flag, and the caller's
		// deadline passes in that write.
		{"answer marked ignored", ignoredCreated},
		// The header stripped by a gateway in front of the endpoint
		// (modelled): b learns the endpoint from the flag alone, and the
		// caller's deadline passes while its save is under way.
		{"answer unmarked", unmarkedCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shared *cancelsCallerOnKeyIgnoringSave
			var flags atomic.Int32
			s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
				if n == 1 && flagAsReplicaA(t, shared.Store, "x") {
					flags.Add(1)
					shared.armed.Store(true)
				}
				tc.answer(n, w)
			})
			charge := s.srv.URL + "/api/v1/charge"
			path := filepath.Join(t.TempDir(), "idem.journal")
			js, err := journal.Open(path)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			shared = &cancelsCallerOnKeyIgnoringSave{Store: js, cancel: cancel}
			b, err := idem.New(shared, idem.WithHTTPClient(s.srv.Client()))
			require.NoError(t, err)
			_, err = b.Resume(t.Context())
			require.NoError(t, err)
			journalSentOnce(t, js, "l", "", charge, "")

			res, err := b.Submit(ctx, idem.Request{Key: "x", URL: charge, Body: []byte(`{"amount":5,"order_id":"x"}`)})
			require.Equal(t, int32(1), flags.Load(), "a's flag committed while b's send was out")
			require.Error(t, ctx.Err(), "the caller gave up while the endpoint was journaled")
			require.NoError(t, err, "x's 201, journaled")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, []string{"x"}, s.charged(), "sends: x's one")
			x, err := b.Lookup(t.Context(), "", "x")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, x.State, "x settled by its 201")
			require.Empty(t, x.Review, "x: one send, its flag cleared")
			require.NotNil(t, x.Result)
			require.Equal(t, "pay_1", x.Result.ResourceID, "x's payment, from its answer")
			s.mu.Lock()
			s.keys = nil // x's one charge, counted above
			s.mu.Unlock()
			closeAndResumeKnowingTheEndpoint(t, s, b, js, path)
		})
	}
}

// unmarkedCreated is ignoredCreated without its Idempotency-Status.
func unmarkedCreated(n int, w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled"}`, n)
}
