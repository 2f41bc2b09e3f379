package idem_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// An endpoint longer than journal.MaxKeyIgnoringEndpoint (a path with a
// long id: Solidgate-style /v1/charge/{merchant}, modelled 5,000 bytes
// long) can never be journaled (journal.ErrInvalid): the ReviewKeyIgnored
// flag of x, sent there, is all that tells a restarted process of it.
// Before, Resume's visit of x, which journals the endpoint before its
// status query, counted that refusal as a failing journal: Resume
// returned an error at every start-up, and each Run pass so; and
// Confirm's error said a redelivery settles x, which none could. Resume
// now hands x off, still flagged, with no error; Confirm's error says
// to settle x by hand, and Resolve does. l, lost there, is never resent.
func TestKeyIgnoredFlagOfAnEndpointTooLongToJournal(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	path := filepath.Join(t.TempDir(), "idem.journal")
	charge := s.srv.URL + "/api/v1/charge/" + strings.Repeat("m", 5000)
	js := journalFlaggedAndLost(t, path, charge, s.srv.URL+"/api/v1/orders")
	require.NoError(t, js.Close())

	c := resumeWithoutResendingL(t, s, path) // Resume: no error
	err := confirmXSucceeded(c)
	require.ErrorIs(t, err, journal.ErrInvalid)
	require.ErrorContains(t, err, "settle it by hand (Resolve)")
	require.NotContains(t, err.Error(), "redelivery settles", "no redelivery can")
	x, err := c.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, x.Review, "journal: x still flagged")
	// Nothing but a person changes an endpoint too long to journal: x is
	// not visited again at the reconcile delay (30 s before, for ever,
	// each visit an fsync'd commit), but as a flag is, daily.
	require.Greater(t, time.Until(x.NextDue), 23*time.Hour, "x's next visit")

	res, err := c.Resolve(t.Context(), "", "x", idem.Resolution{State: idem.StateSucceeded, ResourceID: "pay_x", Reason: "found in the dashboard", By: "ops"})
	require.NoError(t, err, "Resolve(x)")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Empty(t, s.charged(), "charges, by key")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 1, s.queries, "status queries: l's; x's would clear its flag")
}
