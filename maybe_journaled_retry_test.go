package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// outageStore models the journal of pgjournal through a PostgreSQL
// outage: its first create is committed but the connection breaks before
// the COMMIT's answer arrives (pgx cannot tell a lost answer from a lost
// COMMIT, and pgjournal reports journal.ErrMaybeCommitted), and its
// second fails before anything is sent, as while the server restarts and
// refuses connections (pgjournal's plain error: "nothing was written").
// Later creates reach the journal.
type outageStore struct {
	idem.Store
	mu      sync.Mutex
	creates int
}

func (s *outageStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	s.mu.Lock()
	s.creates++
	n := s.creates
	s.mu.Unlock()
	switch n {
	case 1:
		if _, err := s.Store.Create(ctx, rec); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("pgjournal: create %q: %w: unexpected EOF", rec.Key, journal.ErrMaybeCommitted)
	case 2:
		return nil, fmt.Errorf("pgjournal: create %q: failed to connect to `user=idem database=idem`: dial error: connection refused", rec.Key)
	}
	return s.Store.Create(ctx, rec)
}

// A create whose commit's answer was lost leaves its key maybe journaled
// in this process: the same key's next create that fails before reaching
// the journal (the database still down) cannot say "nothing journaled"
// for the operation, whose first create may have committed. It is
// ErrUnknownOutcome with the key, as the first was: a caller that follows
// the errors' contract (another error means nothing journaled and nothing
// will be sent: place the order anew once the journal answers) placed it
// under a new key, sent, and Resume then sent the first one too: two
// orders for one intent. Retrying the key finds the journaled operation
// and carries it out once.
func TestMaybeJournaledKeyStaysUnknownWhileJournalDown(t *testing.T) {
	for _, mode := range []string{"submit", "prepare"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			c, err := idem.New(&outageStore{Store: e.store}, e.baseOpts()...)
			require.NoError(t, err)
			call := func(req idem.Request) error { return submitOrPrepare(e.ctx, c, mode, req) }

			req := e.req("", `{"amount":7}`) // a key idem makes up
			err = call(req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "first call, its commit's answer lost")
			var ie *idem.Error
			require.ErrorAs(t, err, &ie)
			first := ie.Key

			req.Key = first
			keys, errs, err := retryAsDocsSay(t, req, "", call, nil)
			require.NoError(t, err, "the caller's last call")

			// Later, the process restarts and resumes what is open.
			require.NoError(t, c.Close())
			e.restart()
			_, err = e.client.Resume(e.ctx)
			require.NoError(t, err)

			orders := 0
			sent := map[string]bool{}
			for _, r := range e.srv.Requests() {
				if r.Method != http.MethodGet && !sent[r.Key] {
					sent[r.Key] = true
					orders += e.srv.Effects(scope, r.Key)
				}
			}
			require.Equal(t, 1, orders, "orders at the server for one intent")
			ops, err := e.client.List(e.ctx, idem.Filter{})
			require.NoError(t, err)
			require.Len(t, ops, 1, "operations journaled for one intent")
			require.Equal(t, first, ops[0].Key)
			require.Equal(t, idem.StateSucceeded, ops[0].State)
			require.Len(t, e.submits(first), 1, "submits of the first key")
			require.Equal(t, 1, e.srv.Effects(scope, first), "orders")
			require.Equal(t, []string{first, first, first}[:len(keys)], keys, "keys the caller used after the first call")
			// The retry that could not reach the journal.
			require.ErrorIs(t, errs[0], idem.ErrUnknownOutcome, "a retry that could not reach the journal")
			require.ErrorIs(t, errs[0], journal.ErrMaybeCommitted, "a retry that could not reach the journal")
			require.ErrorContains(t, errs[0], "never a new one")
			require.ErrorContains(t, errs[0], "connection refused", "what kept it from the journal")
		})
	}
}
