package idem_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// Two replicas on one journal (as on a pgjournal; modelled here by
// writing replica a's records into b's journal) and a Solidgate payment
// endpoint that ignores the key ("A value of ignored means the endpoint
// does not", https://api-docs.solidgate.com/api/v2/idempotent-requests).
// Replica b starts first (Resume: nothing open, no endpoint known).
// Replica a then sends x there once, learns from its answer that the
// endpoint ignores the key and flags x ReviewKeyIgnored, and is killed
// before the endpoint's save commits; its payment l there is unknown,
// its answer lost. The flag on x is the one thing in the journal that
// says the endpoint ignores the key. x's "Updated Card Order" webhook
// reaches b, whose Client has no Review hook (the default) and knows
// no such endpoint: its Confirm read nothing before it wrote, settled x
// and cleared the flag without journaling the endpoint, which Confirm
// does when it sees the flag (and Resolve always does). The next
// process resent l under the same key, a second charge. Confirm now
// reads the record first whatever the Client knows, and journals the
// endpoint before the flag is cleared.
func TestConfirmOfAKeyIgnoredFlagFromAnotherReplicaJournalsTheEndpoint(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	charge := s.srv.URL + "/api/v1/charge"
	path := filepath.Join(t.TempDir(), "idem.journal")
	js, err := journal.Open(path)
	require.NoError(t, err)
	b, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	_, err = b.Resume(t.Context())
	require.NoError(t, err)

	// Replica a's writes: x flagged after its one send, l lost.
	journalSentOnce(t, js, "x", idem.ReviewKeyIgnored, charge, "")
	journalSentOnce(t, js, "l", "", charge, "")

	require.NoError(t, confirmXSucceeded(b), "b.Confirm(x)")
	x, err := b.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, x.State, "x settled by its event")
	require.Empty(t, x.Review, "x: one send, its flag cleared")
	closeAndResumeKnowingTheEndpoint(t, s, b, js, path)
}
