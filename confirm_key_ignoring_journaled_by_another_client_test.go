package idem_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Two Clients on one journal (replicas on one PostgreSQL; the Client a
// rollout's Shutdown drains and the one that replaces it): b's payment k
// to a Solidgate endpoint that does not de-duplicate by the key ("A value
// of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) loses both
// sends' answers (pay_1, pay_2 charged) before anything says the endpoint
// ignores the key; b has read the journaled endpoints (none) for that
// resend. a's payment k0 is then answered 201 marked ignored: a learns
// the endpoint and journals it, and k0 settles unflagged. k's "Updated
// Card Order" event comes to b, whose Confirm judged whether k was sent
// twice to an endpoint that ignores the key by the endpoints it had read
// once: it settled k clean, two charges and nobody told. Read again,
// the journaled endpoint flags it first: settled ReviewMaybeTwice.
func TestConfirmOfTwoLostSendsToAnEndpointAnotherClientJournaledKeepsMaybeTwice(t *testing.T) {
	var (
		mu      sync.Mutex
		stop    context.CancelFunc // the call whose request this is gives up
		reviews []string
	)
	s := newKeyIgnoringCharges(t, twoLostThen(&mu, &stop, ignoredCreated)) // a's k0: pay_3
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	clock := idemtest.NewClock(epoch)
	b, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock),
		idem.WithHooks(idem.Hooks{Review: func(_ context.Context, r *idem.Result) {
			mu.Lock()
			reviews = append(reviews, r.Key+" "+r.Review)
			mu.Unlock()
		}}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	// New refuses a second Client on one Store: a's is the journal under
	// a pointer of its own, every optional interface kept.
	a, err := idem.New(&struct{ *journal.Store }{store}, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	url := s.srv.URL + "/api/v1/charge"

	submitUntilGivenUp(t, b, s, &mu, &stop)
	s.requireSeen(t, []string{"k", "k"}, 1)

	_, err = a.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err, "a.Submit(k0): 201, marked ignored")
	kept, err := store.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + url}, kept, "journal: the endpoint, journaled by a")

	res, err := b.Confirm(t.Context(), "", "k", cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok"))
	require.NoError(t, err, "b.Confirm()")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, idem.ReviewMaybeTwice, res.Review, "b.Confirm(): Review: pay_2 may have charged too")

	op, err := b.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State, "journal: State")
	require.Equal(t, idem.ReviewMaybeTwice, op.Review, "journal: Review")
	s.requireSeen(t, []string{"k", "k", "k0"}, 1)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"k " + idem.ReviewMaybeTwice}, reviews, "b's Review hook calls")
}
