package idem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// An outbox's intent (PrepareIn), which no caller Does, visited by a
// replica on release 2's settings (the key's header renamed) is flagged
// ReviewKeyMoved with a flagged operation's daily recheck as NextDue.
// Release 1's Run, which drives it as unflagged (movedHere), took that
// date for a flag's schedule rather than one of its own and sent the
// order only a day later: the key of a send whose answer is then lost,
// kept 24 hours on Stripe, expires before Run can resend, and the order
// goes to a person. Run's first pass makes it due now (reschedule), and
// sends it before the clock reaches the reconciler's maximum interval: 1
// order, settled.
func TestKeyMovedFlagOutboxIntentSentByRunAtOnce(t *testing.T) {
	e := newKeyMovedDeploy(t)
	e.prepare(true)
	e.resume(true)
	rec := e.record()
	require.Equal(t, idem.ReviewKeyMoved, rec.Review)
	require.False(t, rec.NextDue.Before(e.clock.Now().Add(idem.DefaultReconcileMaxInterval+time.Hour)), "NextDue: the premise, a recheck far ahead")

	// Run sleeps on the clock, which its Sleep moves on at once: held at
	// the interval, it cannot reach the day's recheck.
	limit := e.clock.Now().Add(idem.DefaultReconcileMaxInterval)
	_, release := e.clock.HoldFrom(limit)
	defer release()
	e.run(func(op *idem.Operation) bool { return op.State.Terminal() })
	orders, posts := e.srv.counts()
	require.Equal(t, [2]int{1, 1}, [2]int{orders, posts}, "orders, posts")
	rec = e.record()
	require.Equal(t, journal.StateSucceeded, rec.State)
	require.Equal(t, "", rec.Review)
	require.True(t, rec.Attempts[0].Start.Before(limit), "sent at %v, after the interval", rec.Attempts[0].Start)
}
