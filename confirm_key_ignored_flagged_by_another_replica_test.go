package idem_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
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
	settleOnASharedJournal(t, idem.ReviewKeyIgnored, func(js *journal.Store) idem.Store { return js }, confirmXSucceeded)
}

// settleOnASharedJournal starts replica b on a new journal (its Store
// wrap's of it) and runs its Resume: nothing open, no endpoint known.
// Then it journals replica a's writes, x sent once to a charge endpoint
// of newKeyIgnoringCharges's and flagged xReview, and l lost there;
// settles x on b (confirmXSucceeded, resolveXSucceeded), which must
// leave it succeeded and unflagged; and starts the next process, which
// must know the endpoint and charge l no second time
// (closeAndResumeKnowingTheEndpoint).
func settleOnASharedJournal(t *testing.T, xReview string, wrap func(*journal.Store) idem.Store, settle func(*idem.Client) error) {
	t.Helper()
	s := newKeyIgnoringCharges(t, ignoredCreated)
	charge := s.srv.URL + "/api/v1/charge"
	path := filepath.Join(t.TempDir(), "idem.journal")
	js, err := journal.Open(path)
	require.NoError(t, err)
	b, err := idem.New(wrap(js), idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	_, err = b.Resume(t.Context())
	require.NoError(t, err)

	journalSentOnce(t, js, "x", xReview, charge, "")
	journalSentOnce(t, js, "l", "", charge, "")

	require.NoError(t, settle(b), "settle x on b")
	x, err := b.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, x.State, "x settled by its event")
	require.Empty(t, x.Review, "x: one send, its flag cleared")
	closeAndResumeKnowingTheEndpoint(t, s, b, js, path)
}

// flaggedBetweenReadAndWrite is a journal shared with another replica
// whose drive flags the operation ReviewKeyIgnored (its answer marked
// ignored) once, just before the first Confirm's write, after the
// confirming Client read it unflagged; that replica is then killed
// before its save of the endpoint commits (modelled: the flag is all
// it writes).
type flaggedBetweenReadAndWrite struct {
	*journal.Store
	flagged atomic.Bool
}

func (s *flaggedBetweenReadAndWrite) Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error) {
	if err := s.flagOnce(ctx, scope, key); err != nil {
		return nil, err
	}
	return s.Store.Confirm(ctx, scope, key, c)
}

func (s *flaggedBetweenReadAndWrite) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	if err := s.flagOnce(ctx, scope, key); err != nil {
		return nil, err
	}
	return s.Store.Resolve(ctx, scope, key, m)
}

// flagOnce commits replica a's flag on the first write it precedes.
func (s *flaggedBetweenReadAndWrite) flagOnce(ctx context.Context, scope, key string) error {
	if !s.flagged.CompareAndSwap(false, true) {
		return nil
	}
	_, err := s.Update(ctx, scope, key, func(r *journal.Record) error {
		r.Review = idem.ReviewKeyIgnored
		return nil
	})
	return err
}

// As above, but replica a's flag on x commits between b's Confirm
// reading x (unflagged) and writing its settlement: x's webhook is sent
// as x's answer is, and reaches b while a journals that answer. The
// settlement cleared the flag a had just set, the endpoint's one trace,
// and the next process resent l, a second charge. The Store now writes
// nothing over a flag its caller did not read
// (Confirmation.UnlessFlaggedKeyIgnored), and Confirm reads again and
// journals the endpoint first.
func TestConfirmOfAKeyIgnoredFlagSetBetweenItsReadAndItsWriteJournalsTheEndpoint(t *testing.T) {
	settleFlaggedBetweenReadAndWrite(t, confirmXSucceeded)
}

// settleFlaggedBetweenReadAndWrite is settleOnASharedJournal with x
// unflagged when b reads it and flagged by replica a before b's write
// (flaggedBetweenReadAndWrite).
func settleFlaggedBetweenReadAndWrite(t *testing.T, settle func(*idem.Client) error) {
	t.Helper()
	var shared *flaggedBetweenReadAndWrite
	settleOnASharedJournal(t, "", func(js *journal.Store) idem.Store {
		shared = &flaggedBetweenReadAndWrite{Store: js}
		return shared
	}, settle)
	require.True(t, shared.flagged.Load(), "a's flag committed between b's read and write")
}
