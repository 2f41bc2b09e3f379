package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// errOtherFirst rolls back a transaction of otherFirstStore's so that the
// other replica's commit lands before it is made again.
var errOtherFirst = errors.New("the other replica commits first")

// otherFirstStore is replica b's Store: once armed, its next Update of a
// record whose last attempt is a finished one of kind after (a result
// query: the commit of the resend that query's answer let through; a
// submit: of the resend after it) is rolled back, first runs (the other
// replica's writes, as they would land between b's judgement of the
// resend and its commit), and the Update is made again, reading what
// they committed.
type otherFirstStore struct {
	*pgjournal.Store

	first func()
	after journal.AttemptKind
	armed atomic.Bool
}

func (s *otherFirstStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	rec, err := s.Store.Update(ctx, scope, key, func(r *journal.Record) error {
		if n := len(r.Attempts); s.armed.Load() && n > 0 && r.Attempts[n-1].Kind == s.after && r.Attempts[n-1].Done {
			return errOtherFirst
		}
		return fn(r)
	})
	if errors.Is(err, errOtherFirst) && s.armed.CompareAndSwap(true, false) {
		s.first()
		return s.Store.Update(ctx, scope, key, fn)
	}
	return rec, err
}

// replicasOnOneSchema opens replicas a and b of a service on one fresh
// schema, each on a pool of its own, with client: a's Store is what
// wrapA makes of its own, b's an otherFirstStore, not armed.
func replicasOnOneSchema(t *testing.T, client *http.Client, wrapA func(*pgjournal.Store) idem.Store) (a, b *idem.Client, bs *otherFirstStore) {
	t.Helper()
	schema := openStore(t).Schema()
	open := func() *pgjournal.Store {
		s, err := pgjournal.Open(context.Background(), dsn(t), pgjournal.WithSchema(schema))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	newReplica := func(store idem.Store, owner string) *idem.Client {
		c, err := idem.New(store, idem.WithHTTPClient(client), idem.WithLease(owner, idem.DefaultLeaseDuration))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	bs = &otherFirstStore{Store: open()}
	return newReplica(wrapA(open()), "replica-a"), newReplica(bs, "replica-b"), bs
}

// confirmRefusedStore is replica a's Store, whose Confirm the database
// refuses (connection refused, nothing written), as while it restarts.
type confirmRefusedStore struct{ *pgjournal.Store }

func (s confirmRefusedStore) Confirm(_ context.Context, _, key string, _ journal.Confirmation) (*journal.Record, error) {
	return nil, fmt.Errorf("pgjournal: confirm %q: %w", key, syscall.ECONNREFUSED)
}

// saveHeldStore is replica a's confirmRefusedStore while its journaling
// of an endpoint learnt to ignore the key waits for the database (a slow
// commit), until released.
type saveHeldStore struct {
	confirmRefusedStore
	release chan struct{}
}

func (s saveHeldStore) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.confirmRefusedStore.AddKeyIgnoring(ctx, endpoint)
}

// Two replicas on one PostgreSQL journal: b sends payment k to a
// Solidgate endpoint that does not de-duplicate by the key ("A value of
// ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests); both sends'
// answers are lost (two charges) and b's caller gives up. Replica a's own
// payment k0 then learns that the endpoint ignores the key, its journaling
// of the endpoint held by a slow commit. b's caller
// retries k (Do): its query finds nothing, and while it journals its
// resend, k's "Updated Card Order" event reaches a, whose Confirm flags k
// ReviewKeyIgnored before the confirmation, which the database refuses.
// b's attempt committed on the flagged row, and b, which learnt nothing
// from its own lost answers, sent it: a third charge. It is not sent now.
func TestIgnoredKeyFlaggedByAnotherReplicaIsNotResent(t *testing.T) {
	ctx := context.Background()
	var (
		mu   sync.Mutex
		keys []string
		stop context.CancelFunc
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet { // the order's status: not found yet
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"2.01","message":"order not found"}}`)
			return
		}
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		if n == 2 {
			stop() // b's caller gives up
		}
		mu.Unlock()
		if n == 3 { // a's k0, charged
			w.Header().Set("Idempotency-Status", "ignored")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"code":"5.01","message":"internal error"}}`)
			return
		}
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close() // charged, the answer lost
		}
	}))
	t.Cleanup(srv.Close)
	charges := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), keys...)
	}
	saved := make(chan struct{})
	a, b, bs := replicasOnOneSchema(t, srv.Client(), func(s *pgjournal.Store) idem.Store {
		return saveHeldStore{confirmRefusedStore{s}, saved}
	})
	bs.after = journal.AttemptQuery
	url := srv.URL + "/api/v1/charge"

	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	mu.Lock()
	stop = cancel
	mu.Unlock()
	_, err := b.Submit(callCtx, idem.Request{Key: "k", URL: url, ResultURL: srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "b.Submit(k)")
	require.Equal(t, []string{"k", "k"}, charges())

	res, err := a.Submit(ctx, idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview, "a.Submit(k0)")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)

	var confirmErr error
	bs.first = func() {
		_, confirmErr = a.Confirm(ctx, "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pay_1",
			Source: "solidgate", EventID: "evt_pay_1_settle_ok", Reason: "card_order.updated"})
	}
	bs.armed.Store(true)
	op, err := b.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.Empty(t, op.Review, "journal before the retry: Review")
	res, err = b.Do(ctx, op)
	require.ErrorIs(t, confirmErr, syscall.ECONNREFUSED, "a.Confirm()")
	require.ErrorIs(t, err, idem.ErrNeedsReview, "b.Do(k)")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review, "b.Do(k): Review")
	require.Equal(t, []string{"k", "k", "k0"}, charges(), "charges, by the key each request carried")
	close(saved)

	op, err = a.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State, "journal: State")
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: Review")
	require.Equal(t, 5, op.Attempts, "journal: two charges, two queries and the attempt not sent")
}
