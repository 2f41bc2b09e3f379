package idem_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// A caller resubmits, after a crash, an order journaled without
// credentials, and puts its API key in the Request this time (X-Api-Key,
// as an API's docs show it). Prepare would refuse that header for a new
// operation; for the journaled one the resubmission drives what is on
// disk: the same key and bytes, sent once, the header neither journaled,
// logged nor sent (credentials come from the request hook, at send time).
func TestCredentialHeaderOnResubmissionNeverJournaled(t *testing.T) {
	const secret = "sk_live_RESUBMITTED_KEY"
	for _, how := range []string{"submit", "prepare"} {
		t.Run(how, func(t *testing.T) {
			var logs syncBuffer
			e := newEnv(t, clientOpts(idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))))
			_, err := e.client.Prepare(e.ctx, e.req("k", `{"n":1}`))
			require.NoError(t, err)
			e.crashMidAttempt("k")
			var mu sync.Mutex
			var sent []http.Header
			base := e.srv.Client().Transport
			e.opts = append(e.opts, idem.WithHTTPClient(&http.Client{Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				sent = append(sent, r.Header.Clone())
				mu.Unlock()
				return base.RoundTrip(r)
			})}))
			e.restart()

			req := e.req("k", `{"n":1}`)
			req.Header = http.Header{"X-Api-Key": {secret}}
			finishJournaledOnce(t, e, how, req)
			e.requireSameBytes("k")
			require.NotContains(t, e.record("k").Header, "X-Api-Key")
			mu.Lock()
			require.NotEmpty(t, sent)
			for i, h := range sent {
				require.Emptyf(t, h.Get("X-Api-Key"), "request %d sent the resubmission's header", i+1)
			}
			mu.Unlock()
			require.NotContains(t, logs.b.String(), secret, "a credential was logged")
			requireNotInJournalFile(t, e, secret)
		})
	}
}

// prunedAfterGet is a Store whose first Get of key finds gone, which the
// journal no longer holds: Prune removed the operation right after the
// Get, as it may a settled one past its retention.
type prunedAfterGet struct {
	*journal.Store
	key  string
	mu   sync.Mutex
	gone *journal.Record
}

func (s *prunedAfterGet) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	s.mu.Lock()
	gone := s.gone
	if key == s.key {
		s.gone = nil
	}
	s.mu.Unlock()
	if key == s.key && gone != nil {
		return gone, nil
	}
	return s.Store.Get(ctx, scope, key)
}

// The same resubmission, when the journaled operation is pruned between
// the look-up that lets its credential header through and the write:
// the request was journaled as the caller gave it, X-Api-Key and all.
// What is journaled then holds no credential.
func TestCredentialHeaderOnResubmissionRacingPruneNeverJournaled(t *testing.T) {
	const secret = "sk_live_RESUBMITTED_KEY"
	for _, how := range []string{"submit", "prepare"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			var gone *journal.Record
			_, err := e.client.PrepareIn(e.ctx, e.req("k", `{"n":1}`), func(_ context.Context, r *journal.Record) (*journal.Record, error) {
				gone = r // the operation as it was journaled, then pruned
				return r, nil
			})
			require.NoError(t, err)
			require.NoError(t, e.client.Close())
			store := &prunedAfterGet{Store: e.store, key: "k", gone: gone}
			c, err := idem.New(store, e.baseOpts()...)
			require.NoError(t, err)
			e.client = c

			req := e.req("k", `{"n":1}`)
			req.Header = http.Header{"X-Api-Key": {secret}}
			finishJournaledOnce(t, e, how, req)
			e.requireSameBytes("k")
			require.NotContains(t, e.record("k").Header, "X-Api-Key")
			requireNotInJournalFile(t, e, secret)
		})
	}
}

// Another request (another amount) with a credential header, under the
// key of a journaled order: it was carried to the journal's write as the
// caller gave it, and journaled and sent when the order had just been
// pruned. It is refused for its credential, as it would be under a new
// key: nothing journaled, nothing sent.
func TestAnotherRequestWithCredentialHeaderUnderAJournaledKeyRefused(t *testing.T) {
	const secret = "sk_live_RESUBMITTED_KEY"
	for _, pruned := range []bool{false, true} {
		t.Run(map[bool]string{false: "journaled", true: "pruned after the look-up"}[pruned], func(t *testing.T) {
			e := newEnv(t)
			var journaled *journal.Record
			_, err := e.client.PrepareIn(e.ctx, e.req("k", `{"n":1}`), func(ctx context.Context, r *journal.Record) (*journal.Record, error) {
				journaled = r
				if pruned {
					return r, nil
				}
				return e.store.Create(ctx, r)
			})
			require.NoError(t, err)
			if pruned {
				require.NoError(t, e.client.Close())
				c, err := idem.New(&prunedAfterGet{Store: e.store, key: "k", gone: journaled}, e.baseOpts()...)
				require.NoError(t, err)
				e.client = c
			}
			req := e.req("k", `{"n":2}`)
			req.Header = http.Header{"X-Api-Key": {secret}}
			_, err = e.client.Submit(e.ctx, req)
			require.ErrorIs(t, err, idem.ErrSecretHeader)
			require.NotContains(t, err.Error(), secret)
			require.Empty(t, e.submits("k"), "submits")
			rec, err := e.store.Get(e.ctx, idem.DefaultScope, "k")
			if pruned {
				require.ErrorIs(t, err, journal.ErrNotFound, "journaled")
			} else {
				require.NoError(t, err)
				require.Equal(t, journaled.BodySHA, rec.BodySHA, "the journaled order")
			}
			requireNotInJournalFile(t, e, secret)
		})
	}
}

// getFailsStore fails every Get: a journal that cannot be read for the
// moment (a PostgreSQL journal's connection reset, a context that ended).
type getFailsStore struct {
	idem.Store
	err error
}

func (s *getFailsStore) Get(context.Context, string, string) (*journal.Record, error) {
	return nil, s.err
}

// A resubmission whose credential header is refused, when the journal
// cannot be read to tell whether an earlier release journaled its
// operation: ErrSecretHeader promises nothing journaled and nothing to be
// sent, which may be false (the order is journaled, and Run sends it),
// and a caller who trusts it orders again under a new key. The error says
// the key's operation may exist: retry with this key (ErrUnknownOutcome).
func TestCredentialResubmissionWhenTheJournalCannotBeRead(t *testing.T) {
	const secret = "sk_live_RESUBMITTED_KEY"
	for _, how := range []string{"submit", "prepare"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.client.Prepare(e.ctx, e.req("k", `{"n":1}`))
			require.NoError(t, err)
			require.NoError(t, e.client.Close())
			c, err := idem.New(&getFailsStore{Store: e.store, err: errors.New("journal: read: connection reset by peer")}, e.baseOpts()...)
			require.NoError(t, err)
			e.client = c

			req := e.req("k", `{"n":1}`)
			req.Header = http.Header{"X-Api-Key": {secret}}
			if how == "submit" {
				_, err = c.Submit(e.ctx, req)
			} else {
				_, err = c.Prepare(e.ctx, req)
			}
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "the key's operation may be journaled: %v", err)
			require.NotErrorIs(t, err, idem.ErrSecretHeader)
			require.Contains(t, err.Error(), "never a new one")
			require.Contains(t, err.Error(), "connection reset")
			require.NotContains(t, err.Error(), secret)
			require.Empty(t, e.submits("k"), "submits")
		})
	}
}
