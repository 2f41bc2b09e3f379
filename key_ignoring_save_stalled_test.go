package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// stalledKeyIgnoring is a journal whose AddKeyIgnoring hangs until
// released, whatever its context says: a custom Store on a database that
// stopped answering (modelled: a stalled connection answers nothing, and
// a Store need not heed its context).
type stalledKeyIgnoring struct {
	*journal.Store
	entered chan string   // each endpoint AddKeyIgnoring was called with
	release chan struct{} // closed: AddKeyIgnoring goes on
}

func (s *stalledKeyIgnoring) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	s.entered <- endpoint
	<-s.release
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

// A Solidgate payment endpoint that does not de-duplicate by the key
// ("Idempotency support varies by endpoint. [...] A value of ignored means
// the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) answers k1's
// payment 500 marked ignored. Journaling the endpoint, on a Store that
// hangs, held the drive that learnt it: Submit(k1) did not return its
// payment's outcome (flagged for review, one charge) until the Store did.
// The endpoint is journaled beside the drive: Submit returns at once, and
// Close waits for the journaling before the journal closes.
func TestKeyIgnoringSaveStalledDoesNotHoldThePayment(t *testing.T) {
	s := newKeyIgnoringCharges(t, func(_ int, w http.ResponseWriter) { ignoredInternalError(w) })
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	store := &stalledKeyIgnoring{Store: js, entered: make(chan string, 1), release: make(chan struct{})}
	c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)
	released := false
	t.Cleanup(func() {
		if !released {
			close(store.release)
		}
		_ = c.Close()
	})
	charge := s.srv.URL + "/api/v1/charge"

	type result struct {
		res *idem.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
		done <- result{res, err}
	}()
	select {
	case e := <-store.entered:
		require.Equal(t, "POST "+charge, e, "the endpoint journaled")
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint was never journaled")
	}
	// Well within saveIgnoringTimeout: a save that held Submit until it
	// gave up would pass a wait as long as it.
	var got result
	select {
	case got = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Submit(k1) held by the journaling of its endpoint")
	}
	require.ErrorIs(t, got.err, idem.ErrNeedsReview, "Submit(k1)")
	require.Equal(t, idem.ReviewKeyIgnored, got.res.Review)
	s.requireSeen(t, []string{"k1"}, 0)
	op, err := c.Lookup(t.Context(), "", "k1")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k1's Review")

	close(store.release)
	released = true
	require.NoError(t, c.Close())
	kept, err := js.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + charge}, kept, "journaled before Close returned")
}
