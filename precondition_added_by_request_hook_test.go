package idem_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A service that puts the precondition on at send time (WithRequestHook
// fetching the resource's current ETag per attempt, or a signer adding
// the conditional headers it signs) sends an If-Match or If-None-Match
// the journal does not hold. The 412 to it is judged by the request as
// sent: behind the same retrying sidecar as the journaled precondition's
// tests, the update or create of ours applied, its answer lost, and the
// sidecar's copy refused 412. Read by the journaled headers alone, it
// was failed, and the caller, told so, updated or created again.

// The hook fetches the concurrency token (Banking Circle's, in If-Match:
// docs.bankingcircleconnect.com/guides/concurrency-handling) when the
// update is sent: "1". Our update applies, the sidecar's copy is refused
// 412 for the token it moved. Unknown, left for a person, never failed:
// 1 update applied, 2 PUTs (ours and the sidecar's), nothing resent.
func TestPreconditionFailedToAnIfMatchTheRequestHookAddedIsNoFailure(t *testing.T) {
	s := &tokenGuarded{token: 1, lose: true}
	sidecar := retryingSidecar(t, s.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithRequestHook(func(r *http.Request) error {
		if r.Method == http.MethodPut {
			s.mu.Lock()
			defer s.mu.Unlock()
			r.Header.Set("If-Match", fmt.Sprintf(`"%d"`, s.token))
		}
		return nil
	}))
	res, err := c.Submit(t.Context(), updateRequest(sidecar.URL, true))
	requireVersionRefusalForAPerson(t, c, res, err, "The resource state has changed")
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Empty(t, rec.Header.Values("If-Match"), "the journal does not hold the hook's precondition")
	s.requireOurCopyApplied(t)
}

// The hook makes the payout's PUT create-only (If-None-Match: *, Amazon
// S3's conditional write). Our create makes po_1, the sidecar's copy is
// refused 412: the create's "already exists", what exists may be ours.
// Unknown, left for a person, never failed: 1 payout, 2 PUTs, nothing
// resent, Resume sends nothing.
func TestPreconditionFailedToAnIfNoneMatchTheRequestHookAddedIsNoFailure(t *testing.T) {
	s := &createOnly{lose: true, made: map[string]string{}}
	sidecar := retryingSidecar(t, s.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithRequestHook(func(r *http.Request) error {
		if r.Method == http.MethodPut {
			r.Header.Set("If-None-Match", "*")
		}
		return nil
	}))
	req := createPayout(sidecar.URL, false)
	req.Header = nil
	res, err := c.Submit(t.Context(), req)
	requireCopiedCreateForAPerson(t, c, s, res, err)
}
