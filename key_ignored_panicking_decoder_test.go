package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// ignoredCreatedStringAmount is a Solidgate endpoint's 201 for payment
// pay_n, marked as ignoring the key ("A value of ignored means the
// endpoint does not" de-duplicate,
// https://api-docs.solidgate.com/api/v2/idempotent-requests), its amount
// echoed as the string "12.00" (modelled): the body a caller's decoder
// reading amounts as numbers panics on.
func ignoredCreatedStringAmount(n int, w http.ResponseWriter) {
	w.Header().Set("Idempotency-Status", "ignored")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled","amount":"12.00"}`, n)
}

// numberAmountDecoder panics on an amount that is not a number, as a
// caller's type assertion does.
func numberAmountDecoder(a *idem.Answer) (idem.Outcome, error) {
	var m map[string]any
	if err := json.Unmarshal(a.Body, &m); err == nil {
		_ = m["amount"].(float64)
	}
	return idem.DecodeJSON(a)
}

// A Resume or Run visit's decoder panicked on the answer of an endpoint
// that charges every request and says so (Idempotency-Status: ignored),
// with no result endpoint to ask: the panic came before the endpoint was
// learnt, so it was neither known in memory nor journaled, the visit was
// handed off unknown and unflagged, and each later visit sent the payment
// again: three Resumes, three charges. A Submit whose decoder panicked
// so left its journaled send to the next Resume, which resent it: two.
// Now the call learns the endpoint from the answer's header, journals it,
// and flags the operation ReviewKeyIgnored (as a decoder's error gets it;
// Submit's panic still goes on up): one charge, whatever visits follow.
func TestKeyIgnoredAnswerPanickingDecoderChargesOnce(t *testing.T) {
	ctx := context.Background()
	t.Run("resume", func(t *testing.T) {
		s := newKeyIgnoringCharges(t, ignoredCreatedStringAmount)
		start, stop := numberAmountBoots(t, s)
		c, store := start()
		_, err := c.Prepare(ctx, idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":"12.00","order_id":"o-1"}`)})
		require.NoError(t, err)
		stop(c, store)
		resumeFlaggedKeyIgnored(t, s, start, stop)
	})
	// Submit's panic goes up the caller's stack, but its send was
	// journaled: the next process's Resume resent it, blind to the
	// endpoint (two charges), and only then learnt it.
	t.Run("submit", func(t *testing.T) {
		s := newKeyIgnoringCharges(t, ignoredCreatedStringAmount)
		start, stop := numberAmountBoots(t, s)
		c, store := start()
		require.Panics(t, func() {
			_, _ = c.Submit(ctx, idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":"12.00","order_id":"o-1"}`)})
		})
		stop(c, store)
		resumeFlaggedKeyIgnored(t, s, start, stop)
	})
	t.Run("run", func(t *testing.T) {
		s := newKeyIgnoringCharges(t, ignoredCreatedStringAmount)
		store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
		require.NoError(t, err)
		defer store.Close()
		c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithDecoder(numberAmountDecoder))
		require.NoError(t, err)
		defer c.Close()
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// PrepareIn's operation is due at once: Run's first pass sends it.
		_, err = c.PrepareIn(rctx, idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":"12.00","order_id":"o-1"}`)}, store.Create)
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- c.Run(rctx) }()
		var rec *journal.Record
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			rec, err = store.Get(ctx, idem.DefaultScope, "k")
			require.NoError(t, err)
			if rec.State == journal.StateUnknown {
				break
			}
			require.True(t, time.Now().Before(deadline), "Run's visit left k %s", rec.State)
		}
		cancel()
		require.ErrorIs(t, <-ran, context.Canceled)
		require.Equal(t, idem.ReviewKeyIgnored, rec.Review)
		require.True(t, rec.NextDue.After(rec.Updated), "rechecked later, not resent at once")
		require.Equal(t, []string{"k"}, s.charged(), "charges, by their key")
		require.NoError(t, c.Close()) // waits for the endpoint's save
		kept, err := store.KeyIgnoringEndpoints(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"POST " + s.srv.URL + "/api/v1/charge"}, kept)
	})
}

// numberAmountBoots starts (start) and stops (stop) a Client of s's with
// numberAmountDecoder, on one journal opened anew at each start as a
// restarted process opens it. stop closes the Client, which waits for
// the endpoint's save, and returns the endpoints the journal keeps as
// ignoring the key.
func numberAmountBoots(t *testing.T, s *keyIgnoringCharges) (func() (*idem.Client, *journal.Store), func(*idem.Client, *journal.Store) []string) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	start := func() (*idem.Client, *journal.Store) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithDecoder(numberAmountDecoder))
		require.NoError(t, err)
		return c, store
	}
	stop := func(c *idem.Client, store *journal.Store) []string {
		require.NoError(t, c.Close())
		kept, err := store.KeyIgnoringEndpoints(context.Background())
		require.NoError(t, err)
		require.NoError(t, store.Close())
		return kept
	}
	return start, stop
}

// resumeFlaggedKeyIgnored starts three times, each Resume leaving k
// unknown and flagged ReviewKeyIgnored, its endpoint journaled, its one
// charge made.
func resumeFlaggedKeyIgnored(t *testing.T, s *keyIgnoringCharges, start func() (*idem.Client, *journal.Store), stop func(*idem.Client, *journal.Store) []string) {
	t.Helper()
	ctx := context.Background()
	for boot := 1; boot <= 3; boot++ {
		what := fmt.Sprintf("boot %d", boot)
		c, store := start()
		_, err := c.Resume(ctx)
		require.NoError(t, err, what)
		op, err := c.Lookup(ctx, "", "k")
		require.NoError(t, err, what)
		require.Equal(t, idem.StateUnknown, op.State, what)
		require.Equal(t, idem.ReviewKeyIgnored, op.Review, what)
		require.Equal(t, []string{"POST " + s.srv.URL + "/api/v1/charge"}, stop(c, store), "%s: the endpoint journaled", what)
		require.Equal(t, []string{"k"}, s.charged(), "%s: charges, by their key", what)
	}
}
