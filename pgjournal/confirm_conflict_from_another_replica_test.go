package pgjournal_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// Two replicas on one PostgreSQL journal: b's payment k is accepted with
// 202 and the payment the server holds, which has no lookup by key
// (Checkout.com's {"id":"pay_…","status":"Pending"}), and whose key cache
// forgets: "Subsequent requests with the same key will return the same
// HTTP status code and response body as the original request, providing
// that it was processed successfully ... After this window of time, the
// request will be processed as normal"
// (https://www.checkout.com/docs/developer-resources/api/idempotency);
// modelled: it loses keys early, as Redis evicting under maxmemory does.
// b's resend, which asks how ord_1 stands, comes after k was lost: a
// second payment, ord_2, whose answer is lost as b's caller gives up.
// ord_2's payment_approved event, k in its metadata, reaches replica a
// while b's Resume journals the resend it judged on the unflagged row:
// a's Confirm flags k ReviewConfirmConflict (another payment than the
// one recorded; open, processing ord_1), and b's attempt, committed on
// the flagged row, went to the server that had lost k again: ord_3. It
// is not sent now.
func TestConfirmConflictFromAnotherReplicaStopsTheResend(t *testing.T) {
	ctx := context.Background()
	var (
		mu     sync.Mutex
		keys   []string          // each submit's key
		held   map[string]string // the server's key cache
		orders int
		stop   context.CancelFunc
	)
	held = map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		keys = append(keys, key)
		n := len(keys)
		if n >= 2 {
			clear(held) // the cache lost the key
		}
		id, ok := held[key]
		if !ok {
			orders++
			id = fmt.Sprintf("ord_%d", orders)
			held[key] = id
		}
		if n == 2 {
			stop() // b's caller gives up
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close() // ord_2 made, the answer lost
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, `{"id":%q,"status":"Pending"}`, id)
	}))
	t.Cleanup(srv.Close)
	seen := func() ([]string, int) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), keys...), orders
	}
	a, b, bs := replicasOnOneSchema(t, srv.Client(), func(s *pgjournal.Store) idem.Store { return s })

	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	mu.Lock()
	stop = cancel
	mu.Unlock()
	res, err := b.Submit(callCtx, idem.Request{Key: "k", URL: srv.URL + "/payments", Body: []byte(`{"amount":100,"currency":"EUR"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "b.Submit(k)")
	require.Equal(t, idem.StateProcessing, res.State, "b.Submit(k): State")
	require.Equal(t, "ord_1", res.ResourceID, "b.Submit(k): ResourceID")
	posts, made := seen()
	require.Equal(t, []string{"k", "k"}, posts, "submits, by key")
	require.Equal(t, 2, made, "orders")

	var confirmErr error
	bs.first = func() {
		_, confirmErr = a.Confirm(ctx, "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_2",
			Source: "checkout.com", EventID: "evt_ord_2_approved", Reason: "payment_approved"})
	}
	bs.after = journal.AttemptSubmit
	bs.armed.Store(true)
	sum, err := b.Resume(ctx)
	require.NoError(t, err, "b.Resume()")
	require.ErrorIs(t, confirmErr, idem.ErrConfirmConflict, "a.Confirm(ord_2)")
	require.False(t, bs.armed.Load(), "a's Confirm landed between b's judgement and its commit")
	require.Equal(t, 1, sum.Review, "b.Resume(): flagged")
	posts, made = seen()
	require.Equal(t, []string{"k", "k"}, posts, "submits, by key")
	require.Equal(t, 2, made, "orders")

	op, err := a.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateProcessing, op.State, "journal: State")
	require.Equal(t, idem.ReviewConfirmConflict, op.Review, "journal: Review, a's")
	require.Equal(t, 3, op.Attempts, "journal: two sends and the attempt not sent")
	rec, err := bs.Get(ctx, idem.DefaultScope, "k")
	require.NoError(t, err)
	last := rec.Attempts[len(rec.Attempts)-1]
	require.True(t, last.Kind == journal.AttemptSubmit && last.Done && !last.Wrote, "journal: the last attempt is a submit closed unsent: %+v", last)
}
