package idem_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// downAfterSendStore models pgjournal while PostgreSQL restarts: once down
// (the first submit was sent), every write fails before anything is sent
// (pgx's "failed to connect": a plain error, nothing written), reads too.
type downAfterSendStore struct {
	idem.Store
	down atomic.Bool
}

func (s *downAfterSendStore) refused(key string) error {
	return fmt.Errorf("pgjournal: %q: failed to connect to `user=idem database=idem`: dial error: connection refused", key)
}

func (s *downAfterSendStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	if s.down.Load() {
		return nil, s.refused(rec.Key)
	}
	return s.Store.Create(ctx, rec)
}

func (s *downAfterSendStore) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	if s.down.Load() {
		return nil, s.refused(key)
	}
	return s.Store.Get(ctx, scope, key)
}

func (s *downAfterSendStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	if s.down.Load() {
		return nil, s.refused(key)
	}
	return s.Store.Update(ctx, scope, key, fn)
}

// downAfterSend takes the journal down once the first submit's answer is
// back, before the client can write it.
type downAfterSend struct {
	base  http.RoundTripper
	store *downAfterSendStore
	once  atomic.Bool
}

func (d *downAfterSend) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(r)
	if r.Method == http.MethodPost && d.once.CompareAndSwap(false, true) {
		d.store.down.Store(true)
	}
	return resp, err
}

// submitOrPrepare places req by Submit, or by Prepare and Do (mode
// "prepare").
func submitOrPrepare(ctx context.Context, c *idem.Client, mode string, req idem.Request) error {
	if mode == "submit" {
		_, err := c.Submit(ctx, req)
		return err
	}
	op, err := c.Prepare(ctx, req)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, op)
	return err
}

// retryAsDocsSay is the caller of an intent whose first call was
// ErrUnknownOutcome for req.Key, as the errors' docs tell it, in at most
// three more calls: an ErrUnknownOutcome is retried with the key, any
// other error taken as nothing journaled and the intent placed anew under
// newKey. after runs after each call (the journal comes back). It returns
// the key of each call, their errors and the last one.
func retryAsDocsSay(t *testing.T, req idem.Request, newKey string, call func(idem.Request) error, after func()) (keys []string, errs []error, err error) {
	for range 3 {
		keys = append(keys, req.Key)
		err = call(req)
		if after != nil {
			after()
		}
		errs = append(errs, err)
		if err == nil {
			break
		}
		if !errors.Is(err, idem.ErrUnknownOutcome) {
			t.Logf("call for key %s: %v: taken as nothing journaled, placed anew", req.Key, err)
			req.Key = newKey // nothing journaled, nothing will be sent
		}
	}
	return keys, errs, err
}

// An operation journaled and sent, whose answer could not be written (the
// journal went down), is ErrUnknownOutcome: retry with this key. The
// caller's retry while the journal is still down fails before reaching
// it; it said "nothing was journaled", which the errors' contract (and
// README: "safe to retry, with a new key or not") reads as nothing will be
// sent: a caller that placed the order anew under a new key once the
// journal was back ordered twice, the first key's order having executed
// already. The retry is ErrUnknownOutcome again, and retrying the key
// once the journal answers settles the one order.
func TestJournalDownAfterSendRetryStaysUnknown(t *testing.T) {
	for _, mode := range []string{"submit", "prepare"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			st := &downAfterSendStore{Store: e.store}
			hc := &http.Client{Transport: &downAfterSend{base: e.srv.Client().Transport, store: st}}
			c, err := idem.New(st, append(e.baseOpts(), idem.WithHTTPClient(hc))...)
			require.NoError(t, err)
			call := func(req idem.Request) error { return submitOrPrepare(e.ctx, c, mode, req) }

			req := e.req("order-1", `{"amount":7}`)
			err = call(req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "the first call: sent, its answer unwritten")
			require.Equal(t, 1, e.srv.Effects(scope, "order-1"), "the first key's order executed")

			_, errs, err := retryAsDocsSay(t, req, "order-1-again", call, func() { st.down.Store(false) })
			require.NoError(t, err, "the caller's last call")

			require.Equal(t, 1, e.srv.Effects(scope, "order-1")+e.srv.Effects(scope, "order-1-again"), "orders at the server for one intent")
			require.Empty(t, e.submits("order-1-again"), "submits under a new key")
			require.ErrorIs(t, errs[0], idem.ErrUnknownOutcome, "the retry made while the journal was down")
			require.ErrorContains(t, errs[0], "never a new one")
			require.ErrorContains(t, errs[0], "connection refused", "what kept it from the journal")
			require.Len(t, e.submits("order-1"), 1, "submits of the first key")
			require.Equal(t, journal.StateSucceeded, e.record("order-1").State)
		})
	}
}
