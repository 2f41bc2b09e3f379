package idem_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// learntBeforeFirstUpdate is a journal shared with replica b (pgjournal,
// or two Clients on one bbolt file: modelled by writing b's writes into
// a's journal), which learns that key's endpoint ignores the key, from
// another payment's answer, once: just before the first Update of key
// replica a makes, after a's drive read key and the journaled endpoints
// and judged the resend safe. learnt is b's write.
type learntBeforeFirstUpdate struct {
	*journal.Store
	key    string
	learnt func(s *journal.Store, scope, key string) error
	done   atomic.Bool
}

func (s *learntBeforeFirstUpdate) Update(ctx context.Context, scope, key string, fn func(r *journal.Record) error) (*journal.Record, error) {
	if key == s.key && s.done.CompareAndSwap(false, true) {
		if err := s.learnt(s.Store, scope, key); err != nil {
			return nil, err
		}
	}
	return s.Store.Update(ctx, scope, key, fn)
}

// Two replicas on one journal and a Solidgate payment endpoint that
// ignores the key ("A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests): every
// POST charges. Payment x was sent there once by an earlier process,
// charged, its answer lost: unknown, with no status endpoint. Replica
// a's Resume reads x and the journal's endpoints (none), and judges the
// resend safe; before its drive journals the attempt (the write before
// the send), replica b learns from another payment's answer that the
// endpoint ignores the key and either journals the endpoint (its save
// committed: its other open operations are not flagged) or, its save
// failed or its Store keeping none, flags x ReviewKeyIgnored. a's resend
// went out on the endpoint b had journaled, a second charge of x
// ([x, x]); it now reads the journal's endpoints again after its
// attempt is journaled, and sends nothing ([x]), x left unknown and
// flagged ReviewKeyIgnored. The flag b sets was already read back by the
// attempt's write and blocked the send: held here beside it.
func TestResendOfAnEndpointLearntKeyIgnoringByAnotherReplicaBeforeItsAttemptIsNotSent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		learnt func(s *journal.Store, scope, key string) error
	}{
		{"endpoint journaled", func(s *journal.Store, scope, key string) error {
			rec, err := s.Get(context.Background(), scope, key)
			if err != nil {
				return err
			}
			return s.AddKeyIgnoring(context.Background(), rec.Method+" "+rec.URL)
		}},
		{"flagged", func(s *journal.Store, scope, key string) error {
			_, err := s.Update(context.Background(), scope, key, func(r *journal.Record) error {
				r.Review = idem.ReviewKeyIgnored
				return nil
			})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, js := xChargedOnceAnswerLost(t)
			shared := &learntBeforeFirstUpdate{Store: js, key: "x", learnt: tc.learnt}
			a, err := idem.New(shared, idem.WithHTTPClient(s.srv.Client()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = a.Close() })

			_, err = a.Resume(t.Context())
			require.NoError(t, err)
			require.True(t, shared.done.Load(), "b's write committed between a's read and a's attempt")
			require.Equal(t, []string{"x"}, s.charged(), "charges, by key: x's first only")
			x, err := a.Lookup(t.Context(), "", "x")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, x.State, "x")
			require.Equal(t, idem.ReviewKeyIgnored, x.Review, "x's review")
		})
	}
}

// xChargedOnceAnswerLost is a key-ignoring charge endpoint and a
// journal holding payment x, unknown: sent there once by an earlier
// process, charged, its answer lost.
func xChargedOnceAnswerLost(t *testing.T) (*keyIgnoringCharges, *journal.Store) {
	t.Helper()
	s := newKeyIgnoringCharges(t, ignoredCreated)
	charge := s.srv.URL + "/api/v1/charge"
	chargeOnceAnswerLost(t, charge, "x")
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	journalSentOnce(t, js, "x", "", charge, "")
	return s, js
}

// chargeOnceAnswerLost is an earlier process's one send of payment key
// to charge, which charged; its answer (read here and dropped) never
// reached the journal.
func chargeOnceAnswerLost(t *testing.T, charge, key string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, charge, bytes.NewReader([]byte(`{"amount":100}`)))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
}

// endpointsUnreadAfterUpdate is a journal whose endpoints cannot be
// read once an Update of key has been made (a database failing over).
type endpointsUnreadAfterUpdate struct {
	*journal.Store
	key     string
	updated atomic.Bool
}

func (s *endpointsUnreadAfterUpdate) Update(ctx context.Context, scope, key string, fn func(r *journal.Record) error) (*journal.Record, error) {
	if key == s.key {
		s.updated.Store(true)
	}
	return s.Store.Update(ctx, scope, key, fn)
}

func (s *endpointsUnreadAfterUpdate) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	if s.updated.Load() {
		return nil, errEndpointsUnread
	}
	return s.Store.KeyIgnoringEndpoints(ctx)
}

var errEndpointsUnread = errors.New("endpoints unread: the database is failing over")

// As above, with the journal's endpoints unreadable once a's attempt is
// journaled: whether another replica journaled the endpoint since is
// unknown, and the resend is not sent; x is handed to the reconciler,
// unknown and unflagged, its unsent attempt closed as never sent, and
// Resume fails as for any journal read that fails before a resend.
func TestResendWhoseEndpointsCannotBeReadAgainIsNotSent(t *testing.T) {
	s, js := xChargedOnceAnswerLost(t)
	shared := &endpointsUnreadAfterUpdate{Store: js, key: "x"}
	a, err := idem.New(shared, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })

	_, err = a.Resume(t.Context())
	require.ErrorIs(t, err, errEndpointsUnread, "Resume: the journal failing")
	require.Equal(t, []string{"x"}, s.charged(), "charges, by key: x's first only")
	x, err := js.Get(t.Context(), idem.DefaultScope, "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, x.State, "x")
	require.Empty(t, x.Review, "x's review")
	require.Len(t, x.Attempts, 2, "x's attempts: the send, the resend journaled")
	require.False(t, x.Attempts[1].Wrote, "x's resend: closed as never sent")
}
