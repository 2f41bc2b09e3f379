package idem_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// resolveXSucceeded settles x by hand, as a person who found its payment
// in Solidgate's dashboard does.
func resolveXSucceeded(c *idem.Client) error {
	_, err := c.Resolve(context.Background(), "", "x", idem.Resolution{State: idem.StateSucceeded, ResourceID: "pay_x", Reason: "found in the dashboard", By: "ops"})
	return err
}

// A Solidgate payment endpoint ignores the key ("A value of ignored means
// the endpoint does not", https://api-docs.solidgate.com/api/v2/idempotent-requests).
// The journal holds x, flagged ReviewKeyIgnored by the process before,
// and l, whose answer there was lost: the endpoint's save failed (the
// disk full for a while), and x's flag is the one thing on disk that says
// the endpoint ignores the key. A person resolves x; Resolve cleared the
// flag without journaling the endpoint, and the next process's Resume
// resent l under the same key: a second charge (charged: [l]). Resolve
// now journals the endpoint first; failing, it writes nothing and says
// so, and the person's second try journals it and settles x (charged:
// none, l flagged by the next process).
func TestResolveOfAKeyIgnoredFlagWhoseSaveFailedWritesNothing(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	errs, c2 := settleFlaggedWhileSavesFail(t, s, "", resolveXSucceeded)
	require.Len(t, errs, 2, "Resolve(x) calls: the first refused, its saves failed")
	require.ErrorIs(t, errs[0], syscall.ENOSPC)
	require.ErrorContains(t, errs[0], "nothing was written: resolve it again")
	x, err := c2.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, x.State, "x settled by the second Resolve")
}

// As above, the journal's store of endpoints ignoring the key full of
// others (paths with ids): Resolve settled x all the same, and the next
// process resent l (charged: [l]). Resolve now fails with
// journal.ErrKeyIgnoringFull, saying how to make room, and writes
// nothing: x stays flagged and teaches the next process the endpoint
// (charged: none, x and l flagged).
func TestResolveOfAKeyIgnoredFlagWithTheStoreFullWritesNothing(t *testing.T) {
	err := refusedWithTheStoreFull(t, resolveXSucceeded)
	require.ErrorContains(t, err, "then resolve it again")
}

// An endpoint longer than journal.MaxKeyIgnoringEndpoint (modelled: a
// path with a 5,000-byte id) is never journaled, and Resolve is the only
// way out for x, flagged for it. It cleared x's flag, the endpoint's
// last trace, and the next process resent l there (charged: [l]).
// Resolve now settles x after flagging l, which a send may have
// executed, ReviewKeyIgnored: l's flag tells the next process (charged:
// none).
func TestResolveOfAKeyIgnoredFlagTooLongToJournalFlagsTheOthersFirst(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	path := filepath.Join(t.TempDir(), "idem.journal")
	js := journalFlaggedAndLost(t, path, s.srv.URL+"/api/v1/charge/"+strings.Repeat("m", 5000), "")
	c, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	require.NoError(t, resolveXSucceeded(c), "Resolve(x)")
	require.NoError(t, c.Close())
	require.NoError(t, js.Close())

	c2 := resumeWithoutResendingL(t, s, path)
	x, err := c2.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, x.State, "x resolved")
}

// As TestConfirmOfAKeyIgnoredFlagSetBetweenItsReadAndItsWriteJournalsTheEndpoint,
// for a person's Resolve on replica b: two replicas on one journal
// (pgjournal, or two Clients on one bbolt file), replica a flags x
// ReviewKeyIgnored from its answer marked ignored
// (https://api-docs.solidgate.com/api/v2/idempotent-requests) and is
// killed before its save of the endpoint commits, the flag committing
// after b's Resolve read x unflagged and before it wrote. The
// resolution cleared the flag, the endpoint's one trace, unjournaled,
// and the next process resent l, a second charge. The Store now writes
// nothing over a flag its caller did not read
// (Manual.UnlessFlaggedKeyIgnored), and Resolve reads again and
// journals the endpoint first.
func TestResolveOfAKeyIgnoredFlagSetBetweenItsReadAndItsWriteJournalsTheEndpoint(t *testing.T) {
	settleFlaggedBetweenReadAndWrite(t, resolveXSucceeded)
}

// A tool that passes the record it failed to read (nil, from a Get that
// found nothing) is told so, not crashed.
func TestKeepKeyIgnoringBeforeResolveOfNoRecordIsAnError(t *testing.T) {
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer js.Close()
	require.ErrorIs(t, idem.KeepKeyIgnoringBeforeResolve(t.Context(), js, nil), idem.ErrInvalidRequest)
}
