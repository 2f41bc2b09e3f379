package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// settlingStore settles the operation just before the first Resolve
// reaches the journal, as a driver or a webhook on another goroutine
// could between the handler's check and its write.
type settlingStore struct {
	*journal.Store
	at      time.Time
	settled bool
}

func (s *settlingStore) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	if !s.settled {
		s.settled = true
		// Unleased, as a webhook's Confirm writes: ctx carries the
		// resolution's own lease.
		_, err := s.Update(context.Background(), scope, key, func(r *journal.Record) error {
			r.State, r.Review, r.Settled, r.Updated = journal.StateSucceeded, "", s.at, s.at
			r.Result = &journal.Result{ResourceID: "ord_real", StatusCode: 201}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return s.Store.Resolve(ctx, scope, key, m)
}

// TestResolveRacingASettlement: an operator resolving what the handler
// saw open never overwrites an outcome that landed before the write (a
// person's "failed" over a real success is a lost order); force still
// corrects it on purpose.
func TestResolveRacingASettlement(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv, js := serverAndJournal(t, clock)
	store := &settlingStore{Store: js, at: epoch.Add(time.Minute)}
	client, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock),
		idem.WithResultEndpoint(srv.ResultTemplate()), idem.WithMaxAttempts(2))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "lost", Count: 2}))
	_, err = client.Submit(context.Background(), idem.Request{Key: "lost", URL: srv.URL + "/orders", Body: []byte(`{}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	h := httptest.NewServer(admin.NewHandler(client, admin.WithClock(clock)))
	t.Cleanup(h.Close)
	f := &fixture{t: t, admin: h}
	body := `{"key":"lost","state":"failed","reason":"looked stuck","by":"alice"}`
	require.Equal(t, http.StatusConflict, f.do(http.MethodPost, "/resolve", body, nil), "POST /resolve of an operation that settled meanwhile")
	rec, err := js.Get(context.Background(), idem.DefaultScope, "lost")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State, "the real outcome is kept")
	require.Equal(t, "ord_real", rec.Result.ResourceID)
	require.Nil(t, rec.Resolved, "no manual resolution recorded")

	body = `{"key":"lost","state":"failed","reason":"refunded","by":"bob","force":true}`
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/resolve", body, nil), "POST /resolve with force")
	rec, err = js.Get(context.Background(), idem.DefaultScope, "lost")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, rec.State)
	require.Equal(t, "bob", rec.Resolved.By)
}
