package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// flagOtherKeyIgnored flags acct-2's k-other, open, "key ignored" for
// its endpoint (POST https://api.example.com/v1/orders), standing in for
// a Solidgate-style payment endpoint whose answer said it ignores the key
// ("A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), the
// endpoint's own save failed: the flag is its one trace. k-pending, sent
// there once with no answer, is what a restarted service would resend.
func flagOtherKeyIgnored(t *testing.T, path string) {
	t.Helper()
	s, err := journal.Open(path)
	require.NoError(t, err)
	_, err = s.Update(context.Background(), "acct-2", "k-other", func(r *journal.Record) error {
		r.Review = journal.ReviewKeyIgnored
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// resolve on the stopped journal cleared k-other's flag, the endpoint's
// one trace, without journaling the endpoint: the service, started again,
// took it for one that de-duplicates and resent k-pending there under the
// same key (modelled: a second charge). resolve now journals the endpoint
// first, then settles k-other.
func TestResolveFileOfAKeyIgnoredFlagJournalsItsEndpointFirst(t *testing.T) {
	fx := newJournal(t)
	const ordersEndpoint = "POST https://api.example.com/v1/orders"
	flagOtherKeyIgnored(t, fx.path)

	_, stderr, code := runIdem(t, "-journal", fx.path, "resolve", "-scope", "acct-2", "k-other", "-succeeded", "-reason", "one charge in the dashboard")
	require.Equal(t, 0, code, stderr)
	r, err := record(t, fx.path, "acct-2", "k-other")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, r.State, "journal: k-other resolved")
	stdout, _ := listEndpoints(t, "-journal", fx.path, "key-ignoring")
	require.Equal(t, "ENDPOINT\n"+ordersEndpoint+"\n", stdout, "endpoints journaled as ignoring the key")
}

// As above, the journal's endpoints at their bound (paths with ids):
// resolve settled k-other all the same, the endpoint's one trace gone.
// It now exits 1 with nothing written, saying how to make room, naming
// idem once (the command's own "idem: " comes first).
func TestResolveFileOfAKeyIgnoredFlagWithTheStoreFullWritesNothing(t *testing.T) {
	fx := newJournal(t)
	others := make([]string, journal.MaxKeyIgnoringEndpoints)
	for i := range others {
		others[i] = fmt.Sprintf("POST https://api.example.com/customers/cus_%d/charges", i)
	}
	keepEndpoints(t, fx.path, others...)
	flagOtherKeyIgnored(t, fx.path)

	stdout, stderr, code := runIdem(t, "-journal", fx.path, "resolve", "-scope", "acct-2", "k-other", "-succeeded", "-reason", "one charge in the dashboard")
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stderr, "make room (idem key-ignoring remove")
	require.NotContains(t, stderr, "idem: idem:")
	r, err := record(t, fx.path, "acct-2", "k-other")
	require.NoError(t, err)
	require.Equal(t, journal.StateProcessing, r.State, "journal: k-other left open")
	require.Equal(t, journal.ReviewKeyIgnored, r.Review, "journal: k-other still flagged")
}
