package idem_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// createOnly is a resource made by a create-only PUT to a name the
// client chose, as Amazon S3's conditional writes are ("Uploads the
// object only if the object key name does not already exist in the
// bucket specified. Otherwise, Amazon S3 returns a 412 Precondition
// Failed error": PutObject's If-None-Match, which takes only "*",
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
// A payout API taking its payouts so (PUT /v1/payouts/{id} with
// If-None-Match: *), which keeps the Idempotency-Key of each payout it
// makes for its result endpoint but checks the precondition first, is
// modelled. lose answers the first create as Envoy does a reset before
// headers (podReset).
type createOnly struct {
	mu      sync.Mutex
	lose    bool
	made    map[string]string // payout id → the key that made it
	puts    []http.Header
	queries int
}

func (s *createOnly) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if key, ok := strings.CutPrefix(r.URL.Path, "/v1/payouts/by-key/"); ok {
		s.queries++
		for id, k := range s.made {
			if k == key {
				_, _ = io.WriteString(w, `{"id":"`+id+`","status":"succeeded"}`)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"No payout with this key."}}`)
		return
	}
	s.puts = append(s.puts, r.Header.Clone())
	id := strings.TrimPrefix(r.URL.Path, "/v1/payouts/")
	if _, exists := s.made[id]; exists && r.Header.Get("If-None-Match") == "*" {
		w.WriteHeader(http.StatusPreconditionFailed)
		_, _ = io.WriteString(w, `{"error":{"code":"PreconditionFailed","message":"At least one of the pre-conditions you specified did not hold"}}`)
		return
	}
	s.made[id] = r.Header.Get("Idempotency-Key")
	if s.lose {
		s.lose = false
		podReset(w)
		return
	}
	_, _ = io.WriteString(w, `{"id":"`+id+`","status":"succeeded"}`)
}

// createPayout is the create-only PUT of payout po_1 under key k, asking
// the result endpoint by the key when result is set.
func createPayout(url string, result bool) idem.Request {
	req := idem.Request{Key: "k", Method: http.MethodPut, URL: url + "/v1/payouts/po_1",
		Header: http.Header{"If-None-Match": {"*"}}, Body: []byte(`{"amount":12500,"currency":"EUR","iban":"DE89370400440532013000"}`)}
	if result {
		req.ResultURL = url + "/v1/payouts/by-key/k"
	}
	return req
}

// Behind the client's own sidecar the create-only PUT makes payout po_1
// and its answer is lost as a 503 reset before headers, which the sidecar
// retries (Istio's default retry_on): the copy is refused 412, the payout
// exists, the only answer idem sees, to its first attempt. Read as
// failed, the caller, told its payout was not made, pays it out again
// under a new payout id: two payouts. It is the create's "order already
// exists" in its standard HTTP form, and read so: without a result
// endpoint, unknown, ReviewRefusedAfterSend, and Resume sends nothing;
// with one, asked by the key the server keeps, settled succeeded.
func TestPreconditionFailedToACreateOnlyPutBehindARetryingMeshIsNoFailure(t *testing.T) {
	t.Run("no result endpoint", func(t *testing.T) {
		s := &createOnly{lose: true, made: map[string]string{}}
		sidecar := retryingSidecar(t, s.serve)
		c := clientFor(t, sidecar, idemtest.NewClock(epoch))
		res, err := c.Submit(t.Context(), createPayout(sidecar.URL, false))
		requireCopiedCreateForAPerson(t, c, s, res, err)
	})
	t.Run("result endpoint", func(t *testing.T) {
		s := &createOnly{lose: true, made: map[string]string{}}
		sidecar := retryingSidecar(t, s.serve)
		c := clientFor(t, sidecar, idemtest.NewClock(epoch))
		res, err := c.Submit(t.Context(), createPayout(sidecar.URL, true))
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "po_1", res.ResourceID)
		s.mu.Lock()
		defer s.mu.Unlock()
		require.Len(t, s.made, 1)
		require.Len(t, s.puts, 2)
		require.Equal(t, 1, s.queries)
	})
}

// requireCopiedCreateForAPerson asserts that create-only payout k, made
// by our PUT and refused 412 to the sidecar's copy at its first attempt
// (res, err), is unknown and left for a person, never failed: 1 payout,
// made under k, 2 PUTs carrying k and If-None-Match: *, and Resume sends
// nothing and leaves it so.
func requireCopiedCreateForAPerson(t *testing.T, c *idem.Client, s *createOnly, res *idem.Result, err error) {
	t.Helper()
	requireOrderExistsUnknown(t, res, err, "pre-conditions you specified did not hold")
	require.Equal(t, 1, res.Attempts)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "still for a person: %+v", sum)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, map[string]string{"po_1": "k"}, s.made)
	require.Len(t, s.puts, 2, "ours and the sidecar's copy, nothing resent")
	for _, h := range s.puts {
		require.Equal(t, "k", h.Get("Idempotency-Key"))
		require.Equal(t, "*", h.Get("If-None-Match"))
	}
}

// A payout another request made under its own key: k's create-only PUT
// is refused 412 at once, and the result endpoint finds nothing under k.
// Nothing of ours was made: once past the read path's lag, failed, with
// the server's words and that the resource exists already.
func TestPreconditionFailedToACreateOnlyPutOfAnotherKeysResourceFails(t *testing.T) {
	s := &createOnly{made: map[string]string{"po_1": "other"}}
	srv := retryingSidecar(t, s.serve)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock)
	res, err := c.Submit(t.Context(), createPayout(srv.URL, true))
	requireFailedPastTheLag(t, c, clock, res, err, "pre-conditions you specified did not hold", "exists already")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.puts, 1, "never resent")
}

// requireFailedPastTheLag asserts that operation "k", refused at its
// first attempt (res, err) for what the result endpoint does not find
// under its key, is unknown until the read path's lag has passed and
// failed once it has, its reason holding each of words.
func requireFailedPastTheLag(t *testing.T, c *idem.Client, clock *idemtest.Clock, res *idem.Result, err error, words ...string) {
	t.Helper()
	require.NotErrorIs(t, err, idem.ErrFailed, "not yet past the result endpoint's lag")
	require.Equal(t, idem.StateUnknown, res.State)
	op := resumeK(t, c, clock, idem.DefaultResultLag)
	require.Equal(t, idem.StateFailed, op.State, "nothing of ours executed")
	require.Empty(t, op.Review)
	require.NotNil(t, op.Result)
	for _, w := range words {
		require.Contains(t, op.Result.Reason, w)
	}
}
