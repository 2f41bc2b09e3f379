package idem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestPrepareIn: PrepareIn journals through the caller's create (here the
// Store's own Create, standing in for a transaction's), the operation is
// due at once and carries the caller's trace, as Prepare's does; a key
// journaled already is Prepare's answer; a create that fails, or that
// changes the record's body, leaves nothing journaled; a Resume visit sends it once, and sees the trace.
func TestPrepareIn(t *testing.T) {
	h := newHookLog()
	e := newEnv(t, clientOpts(idem.WithHooks(h.hooks())))
	var creates int
	create := func(ctx context.Context, r *journal.Record) (*journal.Record, error) {
		creates++
		return e.store.Create(ctx, r)
	}

	op, err := e.client.PrepareIn(tagged(e.ctx, "tx"), e.req("k", `{"n":1}`), create)
	require.NoError(t, err)
	require.Equal(t, 1, creates, "create calls")
	rec := e.record("k")
	require.False(t, rec.NextDue.After(rec.Created), "due at %v, journaled at %v: due at once", rec.NextDue, rec.Created)
	require.Equal(t, "trace-of-tx", rec.Trace)
	require.Empty(t, e.submits("k"), "submits before Run")

	again, err := e.client.PrepareIn(e.ctx, e.req("k", `{"n":1}`), create)
	require.NoError(t, err, "the same request again")
	require.Equal(t, op.Key, again.Key)
	_, err = e.client.PrepareIn(e.ctx, e.req("k", `{"n":2}`), create)
	require.ErrorIs(t, err, idem.ErrKeyConflict, "another request under the key")

	rolledBack := errors.New("tx rolled back")
	_, err = e.client.PrepareIn(e.ctx, e.req("other", `{}`), func(context.Context, *journal.Record) (*journal.Record, error) {
		return nil, rolledBack
	})
	require.ErrorIs(t, err, rolledBack)
	_, err = e.store.Get(e.ctx, idem.DefaultScope, "other")
	require.ErrorIs(t, err, journal.ErrNotFound, "nothing journaled when create fails")
	_, err = e.client.PrepareIn(e.ctx, e.req("other", `{}`), nil)
	require.ErrorIs(t, err, idem.ErrInvalidRequest, "nil create")
	_, err = e.client.PrepareIn(e.ctx, e.req("", `{}`), create)
	require.ErrorIs(t, err, idem.ErrInvalidRequest, "no Key (see pgjournal's TestOutboxWithoutKeyRefused)")
	require.Equal(t, 3, creates, "create calls")
	// The record create is given is the caller's to touch: the Store
	// hashes it in full (it is not the client's own, as Prepare's is),
	// so a body changed in place is refused, not journaled under the
	// digest of other bytes.
	_, err = e.client.PrepareIn(e.ctx, e.req("changed", `{"n":1}`), func(ctx context.Context, r *journal.Record) (*journal.Record, error) {
		r.Body[len(r.Body)-2] = '2'
		return e.store.Create(ctx, r)
	})
	require.ErrorIs(t, err, journal.ErrInvalid, "a body that no longer matches its digest")
	_, err = e.store.Get(e.ctx, idem.DefaultScope, "changed")
	require.ErrorIs(t, err, journal.ErrNotFound, "nothing journaled")

	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Visited, "open operations visited")
	require.Equal(t, idem.StateSucceeded, e.record("k").State)
	require.Len(t, e.submits("k"), 1, "submits")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, []string{"trace-of-tx"}, h.traces, "the visit's CallEvent.Trace")
}

// TestPrepareInCreateWithoutRecord: a create that reports success without
// the record it stored (a Store's outbox write that forgets to return it)
// panicked inside PrepareIn, in the middle of the caller's transaction.
// The call now fails without a panic, with ErrUnknownOutcome and the key
// (create may have journaled it: retry with the same key, never a new
// one), and a retry through a correct create returns the journaled
// operation, sent once.
func TestPrepareInCreateWithoutRecord(t *testing.T) {
	e := newEnv(t, clientOpts())
	forgetful := func(ctx context.Context, r *journal.Record) (*journal.Record, error) {
		_, err := e.store.Create(ctx, r)
		return nil, err
	}
	var err error
	require.NotPanics(t, func() { _, err = e.client.PrepareIn(e.ctx, e.req("k", `{"n":1}`), forgetful) })
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "create without its record")
	var ie *idem.Error
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "k", ie.Key, "the key to retry with")

	op, err := e.client.PrepareIn(e.ctx, e.req("k", `{"n":1}`), e.store.Create)
	require.NoError(t, err, "the retry with the same key")
	require.Equal(t, "k", op.Key)
	_, err = e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, e.record("k").State)
	require.Len(t, e.submits("k"), 1, "submits")
}
