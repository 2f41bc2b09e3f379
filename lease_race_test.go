package idem_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// claimFirst runs fn once, at the first Claim, before claiming: another
// replica gets there first.
type claimFirst struct {
	idem.Store
	once sync.Once
	fn   func()
}

func (s *claimFirst) Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	s.once.Do(s.fn)
	return s.Store.Claim(ctx, scope, key, owner, now, expires)
}

// TestSubmitClaimedFirstByOtherReplica: replica A's Submit journals the
// operation with its first attempt, but replica B (same key, resubmitted
// to another pod) claims it first, sends it, and hands it off. When A gets
// the lease, the attempt it journaled is no longer its unsent one: A must
// journal a new attempt before it sends, not send unjournaled and write
// its answer over B's attempt.
func TestSubmitClaimedFirstByOtherReplica(t *testing.T) {
	e := newEnv(t, noResultEndpoint())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Throttle, Key: "k", RetryAfter: time.Second}))
	b, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithLease("replica-b", idem.DefaultLeaseDuration), idem.WithMaxAttempts(1))...)
	require.NoError(t, err)
	defer b.Close()
	var bErr error
	wrapped := &claimFirst{Store: e.store, fn: func() {
		op, err := b.Lookup(e.ctx, "", "k")
		if err != nil {
			bErr = err
			return
		}
		_, bErr = b.Do(e.ctx, op)
	}}
	a, err := idem.New(wrapped, append(e.baseOpts(), idem.WithLease("replica-a", idem.DefaultLeaseDuration))...)
	require.NoError(t, err)
	defer a.Close()

	res, err := a.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, bErr, idem.ErrUnknownOutcome, "B's Do(): throttled, handed off")
	require.NoError(t, err, "A's Submit()")
	require.Equal(t, idem.StateSucceeded, res.State)

	rec := e.record("k")
	var statuses []int
	for _, at := range rec.Attempts {
		if at.Kind == journal.AttemptSubmit && at.Status != 0 {
			statuses = append(statuses, at.Status)
		}
	}
	require.Equal(t, []int{http.StatusTooManyRequests, http.StatusCreated}, statuses,
		"answers journaled, one attempt each (attempts %+v)", rec.Attempts)
	require.Len(t, e.submits("k"), 2, "submits: B's and A's")
}
