package idem_test

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// bvnkOrigin is a payments API that never replays, as BVNK documents: "If
// you resend the same request with identical credentials and idempotency
// key, BVNK returns a 400 Bad Request status and indicates that a request
// with this ID already exists"
// (https://docs.bvnk.com/bvnk/api-explorer/api-overview/idempotency; the
// words of its body are ours, naming the key's header). It sits behind a
// sidecar with Istio's default retry policy (retryingSidecar): the first
// copy of a submit makes the payment and the pod's connection resets
// (503) before its answer is out, so the sidecar sends the same request
// again, and the 400 to that copy is all the client hears.
type bvnkOrigin struct {
	mu       sync.Mutex
	payments int
	keys     []string // the method and key of each request that reached the service
	used     map[string]bool
}

func (o *bvnkOrigin) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("X-Idempotency-Key")
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keys = append(o.keys, r.Method+" "+key)
	if r.Method == http.MethodGet {
		// BVNK's payout by reference: the key's payment, whichever
		// request made it.
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"id":"po_1","status":"succeeded"}`)
		return
	}
	makeOrRefuse(w, o.used, &o.payments, key, `{"code":"BAD_REQUEST","message":"A request with this X-Idempotency-Key already exists"}`)
}

// makeOrRefuse answers a submit of key to a server that never replays,
// behind a retrying sidecar: the first makes the payment or order (made
// counts them) and the pod's connection resets before its answer is out
// (503, which the sidecar retries); any later one gets refusal, a 400.
func makeOrRefuse(w http.ResponseWriter, used map[string]bool, made *int, key, refusal string) {
	if used[key] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, refusal)
		return
	}
	used[key] = true
	*made++
	podReset(w)
}

// The 400 to idem's first attempt answers the sidecar's copy of it: the
// payment under the key is ours. Failed (ErrFailed) would invite the same
// payment under a new key; it is flagged for a person instead, as a key
// in flight elsewhere is, and nothing resends it: not a second Do, not
// Resume. Nor is the result endpoint asked: the key's payment may be
// another request's, and taken for ours it would lose our order.
func TestKeyAlreadyUsedToAFirstAttemptBehindAMesh(t *testing.T) {
	o := &bvnkOrigin{used: map[string]bool{}}
	sidecar := retryingSidecar(t, o.serve)
	c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare),
		idem.WithResultEndpoint("/payment/v1/payouts/{key}"))
	req := idem.Request{Key: "k", URL: sidecar.URL + "/payment/v1/payouts", Body: []byte(`{"amount":700,"currency":"EUR"}`)}

	res, err := c.Submit(t.Context(), req)
	requireForeignKey(t, res, err)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, 1, res.Attempts)

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyInUse, op.Review)
	// The person deciding whether the payout was made reads the server's
	// own words in the attempt (idem show, the admin handler): "already
	// exists" is no "different request", and ErrKeyConflict's text is.
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Len(t, rec.Attempts, 1)
	require.Equal(t, http.StatusBadRequest, rec.Attempts[0].Status)
	require.Contains(t, rec.Attempts[0].Err, "A request with this X-Idempotency-Key already exists", "the attempt's journaled error")
	_, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.NotErrorIs(t, err, idem.ErrFailed)

	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "still for a person: %+v", sum)
	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyInUse, op.Review)

	o.mu.Lock()
	defer o.mu.Unlock()
	require.Equal(t, 1, o.payments, "payments")
	require.Equal(t, []string{"POST k", "POST k"}, o.keys, "copies: ours and the sidecar's, nothing resent, nothing queried")
}

// To a first attempt, an answer that says the request differs from the
// key's first is another request's refusal of ours: failed, with
// ErrKeyConflict, sent once. One that says only that the key was used may
// be a server that never replays answering a copy of ours: flagged
// ReviewKeyInUse, never ErrFailed, sent once. A "different" that names
// the key a new request should take says nothing of this one.
func TestKeyAlreadyUsedOrDiffersToAFirstAttempt(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answer  shape
		differs bool
	}{
		{"bvnk 400 already exists", shape{status: 400,
			body: `{"code":"BAD_REQUEST","message":"A request with this X-Idempotency-Key already exists"}`}, false},
		// https://www.airwallex.com/docs/payments__error-codes (its
		// request_id is the key; here in the header)
		{"airwallex-worded 400 asking for a different key", shape{status: 400, body: `{"code":"duplicate_request",` +
			`"message":"The same idempotency key has already been used. Please try again with a different idempotency key."}`}, false},
		{"bvnk-shaped 400 saying the body differs", shape{status: 400,
			body: `{"code":"BAD_REQUEST","message":"A request with this X-Idempotency-Key already exists with a different body"}`}, true},
		// https://developers.bluesnap.com/v8976-JSON/docs/idempotency-errors
		{"bluesnap 422 different request", shape{status: 422, body: `{"message":[{"errorName":` +
			`"SAME_IDEMPOTENCY_KEY_WAS_ALREADY_IN_USE_WITH_PREVIOUS_DIFFERENT_REQUEST","code":"60101",` +
			`"description":"Idempotency-Key was already in use with a previous different request"}]}`}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.answer)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			req := idem.Request{Key: "k", URL: v.srv.URL + "/payment/v1/payouts", Body: []byte(`{"amount":700,"currency":"EUR"}`)}
			for range 2 { // the intent submitted again gets the journaled outcome
				res, err := c.Submit(t.Context(), req)
				if tt.differs {
					require.ErrorIs(t, err, idem.ErrFailed)
					require.ErrorIs(t, err, idem.ErrKeyConflict)
					require.Equal(t, idem.StateFailed, res.State)
					require.Empty(t, res.Review)
				} else {
					requireForeignKey(t, res, err)
					require.ErrorIs(t, err, idem.ErrNeedsReview)
					require.False(t, errors.Is(err, idem.ErrFailed))
				}
				v.requireKeys(t, "X-Idempotency-Key", "k", 1)
			}
		})
	}
}
