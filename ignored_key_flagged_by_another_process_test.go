package idem_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// errLandsFirst aborts a transaction of landsFirstStore's so that another
// process's commit lands before it is tried again.
var errLandsFirst = errors.New("another process's commit lands first")

// landsFirstStore is one process's view of a journal other processes
// write too: once armed, the next Update that journals a new submit
// attempt is rolled back, first runs (another process's commit, made as
// this one's transaction began), and the Update is tried again on the
// record that commit left, as a PostgreSQL journal's Update, serialized
// behind the other's row lock, reads it (modelled on pgjournal's SELECT
// ... FOR UPDATE).
type landsFirstStore struct {
	*journal.Store

	mu    sync.Mutex
	first func()
}

func (s *landsFirstStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	s.mu.Lock()
	first := s.first
	s.mu.Unlock()
	if first == nil {
		return s.Store.Update(ctx, scope, key, fn)
	}
	rec, err := s.Store.Update(ctx, scope, key, func(r *journal.Record) error {
		opened := openSubmit(r)
		if err := fn(r); err != nil {
			return err
		}
		if !opened && openSubmit(r) {
			return errLandsFirst
		}
		return nil
	})
	if !errors.Is(err, errLandsFirst) {
		return rec, err
	}
	s.mu.Lock()
	s.first = nil
	s.mu.Unlock()
	first()
	return s.Store.Update(ctx, scope, key, fn)
}

// saveHeldStore is a's view of the journal while its journaling of an
// endpoint learnt to ignore the key waits for the database (a slow
// commit), until released.
type saveHeldStore struct {
	*flagCutStore
	release chan struct{}
}

func (s *saveHeldStore) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.flagCutStore.AddKeyIgnoring(ctx, endpoint)
}

// requireLastUnsent checks that key's last attempt in store is a submit
// closed unsent.
func requireLastUnsent(t *testing.T, store idem.Store, key string) {
	t.Helper()
	rec, err := store.Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	last := rec.Attempts[len(rec.Attempts)-1]
	require.Equal(t, journal.AttemptSubmit, last.Kind)
	require.True(t, last.Done, "journal: the last attempt is closed")
	require.False(t, last.Wrote, "journal: the last attempt was not sent")
}

// openSubmit reports whether r's last attempt is a submit not yet done.
func openSubmit(r *journal.Record) bool {
	n := len(r.Attempts)
	return n > 0 && r.Attempts[n-1].Kind == journal.AttemptSubmit && !r.Attempts[n-1].Done
}

// Two processes share a journal, as services on one PostgreSQL do: the
// payment service (b) and the webhook handler (a). To a Solidgate
// endpoint that does not de-duplicate by the key ("A value of ignored
// means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), b's payment
// loses both sends' answers (pay_1, pay_2 charged) before anything says
// the endpoint ignores the key, and its caller gives up. a's own payment
// k0 then learns that it does (its 500 marked ignored), its journaling of
// the endpoint held by a slow commit. The caller retries
// k (Do); its drive finds it unflagged, queries (not found) and judges the
// resend; meanwhile the "Updated Card Order" event of pay_1 comes to a,
// whose Confirm flags k ReviewKeyIgnored before the confirmation, which
// the journal refuses (connection refused: nothing settled). b's drive
// commits its new attempt on that flagged record, and, having learnt the
// endpoint from no answer of its own, sent it: pay_3, a third charge.
// The flag it committed on now stops the send, and teaches b the
// endpoint: its next payment there whose answer is lost is not resent.
func TestIgnoredKeyFlaggedByAnotherProcessIsNotResent(t *testing.T) {
	var (
		mu      sync.Mutex
		stop    context.CancelFunc // the call whose request this is gives up
		reviews []string
	)
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 3 {
			ignoredInternalError(w) // a's k0 (pay_3), charged
			return
		}
		if n == 2 {
			mu.Lock()
			stop() // b's caller gives up at pay_2
			mu.Unlock()
		}
		dropConnection(w) // b's pay_1, pay_2, then k2's pay_4, charged, the answers lost
	})
	clock := idemtest.NewClock(epoch)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	newClient := func(st idem.Store, name string) *idem.Client {
		c, err := idem.New(st, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock),
			idem.WithHooks(idem.Hooks{Review: func(_ context.Context, r *idem.Result) {
				mu.Lock()
				reviews = append(reviews, name+" "+r.Key+" "+r.Review)
				mu.Unlock()
			}}))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	webhook := &flagCutStore{Store: store}
	saving := &saveHeldStore{flagCutStore: webhook, release: make(chan struct{})}
	a := newClient(saving, "a")
	bStore := &landsFirstStore{Store: store}
	b := newClient(bStore, "b")
	url := s.srv.URL + "/api/v1/charge"

	submitUntilGivenUp(t, b, s, &mu, &stop)
	s.requireSeen(t, []string{"k", "k"}, 1)

	res, err := a.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview, "a.Submit(k0): its answer says the key is ignored")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	s.requireSeen(t, []string{"k", "k", "k0"}, 1)

	event := cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok")
	var confirmErr error
	webhook.mu.Lock()
	webhook.refuseConfirm = true
	webhook.mu.Unlock()
	bStore.mu.Lock()
	bStore.first = func() { _, confirmErr = a.Confirm(t.Context(), "", "k", event) }
	bStore.mu.Unlock()
	op, err := b.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Empty(t, op.Review, "journal before the retry: Review")
	res, err = b.Do(t.Context(), op)
	require.ErrorIs(t, confirmErr, syscall.ECONNREFUSED, "a.Confirm(): the journal refused the confirmation")
	require.ErrorIs(t, err, idem.ErrNeedsReview, "b.Do(k): flagged by a while its attempt was journaled")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review, "b.Do(k): Review")
	s.requireSeen(t, []string{"k", "k", "k0"}, 2)
	close(saving.release)

	op, err = b.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State, "journal: State")
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: Review")
	require.Equal(t, 5, op.Attempts, "journal: attempts, two charges, two queries and the one not sent")
	requireLastUnsent(t, store, "k")

	// The provider redelivers the event: settled, two charges possible.
	res, err = a.Confirm(t.Context(), "", "k", event)
	require.NoError(t, err, "a.Confirm() redelivered")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, idem.ReviewMaybeTwice, res.Review, "a.Confirm(): Review")

	// b learnt the endpoint from the flag: a payment there whose answer is
	// lost is not resent.
	res, err = b.Submit(t.Context(), idem.Request{Key: "k2", URL: url, ResultURL: s.srv.URL + "/api/v1/orders/o-2",
		Body: []byte(`{"amount":7,"order_id":"o-2"}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview, "b.Submit(k2)")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review, "b.Submit(k2): Review")
	s.requireSeen(t, []string{"k", "k", "k0", "k2"}, 3)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"a k0 " + idem.ReviewKeyIgnored, "a k " + idem.ReviewKeyIgnored, "b k " + idem.ReviewKeyIgnored,
		"b k2 " + idem.ReviewKeyIgnored}, reviews, "Review hook calls")
}
