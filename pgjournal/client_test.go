package pgjournal_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// stores are the journals the client behaviours below run on: the bbolt
// journal and the PostgreSQL one must not be told apart by a caller.
var stores = []struct {
	name string
	open func(t testing.TB) idem.Store
}{
	{"bbolt", func(t testing.TB) idem.Store {
		s, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
		require.NoError(t, err)
		return s
	}},
	{"postgres", func(t testing.TB) idem.Store { return openStore(t) }},
}

// TestClientOnEachStore runs the client's core behaviours, with default
// settings, on each journal and asserts the server's side effects.
func TestClientOnEachStore(t *testing.T) {
	behaviours := []struct {
		name string
		run  func(t *testing.T, store idem.Store, srv *idemtest.Server)
	}{
		{"lost response is queried, not resent", func(t *testing.T, store idem.Store, srv *idemtest.Server) {
			c := newClient(t, store, srv)
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
			res, err := c.Submit(context.Background(), order(srv, "k"))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, 1, srv.Effects("", "k"), "side effects")
			require.Equal(t, 1, submits(srv, "k"), "submits")
		}},
		{"key conflict is refused before anything is sent", func(t *testing.T, store idem.Store, srv *idemtest.Server) {
			c := newClient(t, store, srv)
			_, err := c.Submit(context.Background(), order(srv, "k"))
			require.NoError(t, err)
			other := order(srv, "k")
			other.Body = []byte(`{"amount":2}`)
			_, err = c.Submit(context.Background(), other)
			require.ErrorIs(t, err, idem.ErrKeyConflict)
			require.Equal(t, 1, submits(srv, "k"), "submits")
		}},
		{"a restart resumes what was prepared", func(t *testing.T, store idem.Store, srv *idemtest.Server) {
			c := newClient(t, store, srv)
			_, err := c.Prepare(context.Background(), order(srv, "k"))
			require.NoError(t, err)
			// The process stops; the next one (a new owner) resumes.
			require.NoError(t, c.Close())
			restarted := newClient(t, store, srv)
			sum, err := restarted.Resume(context.Background())
			require.NoError(t, err)
			require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
			require.Equal(t, 1, srv.Effects("", "k"))
		}},
		{"unknown is settled by Run", func(t *testing.T, store idem.Store, srv *idemtest.Server) {
			c := newClient(t, store, srv, idem.WithMaxAttempts(1), idem.WithReconcile(20*time.Millisecond, time.Second, time.Hour))
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorAfterCommit, Key: "k"}))
			_, err := c.Submit(context.Background(), order(srv, "k"))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- c.Run(ctx) }()
			waitFor(t, "Run settled it", func() bool {
				op, err := c.Lookup(context.Background(), "", "k")
				return err == nil && op.State == idem.StateSucceeded
			})
			stop()
			require.ErrorIs(t, <-ran, context.Canceled)
			require.Equal(t, 1, srv.Effects("", "k"))
		}},
		{"a cancelled caller never fails the operation", func(t *testing.T, store idem.Store, srv *idemtest.Server) {
			c := newClient(t, store, srv)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := c.Submit(ctx, order(srv, "k"))
			require.True(t, errors.Is(err, idem.ErrUnknownOutcome) || errors.Is(err, context.Canceled), "Submit(): %v", err)
			if op, lerr := c.Lookup(context.Background(), "", "k"); lerr == nil {
				require.NotEqual(t, idem.StateFailed, op.State)
			}
		}},
		{"manual resolution is final", func(t *testing.T, store idem.Store, srv *idemtest.Server) {
			c := newClient(t, store, srv)
			op, err := c.Prepare(context.Background(), order(srv, "k"))
			require.NoError(t, err)
			_, err = c.Resolve(context.Background(), "", "k", idem.Resolution{State: idem.StateFailed, Reason: "cancelled", By: "ops"})
			require.NoError(t, err)
			res, err := c.Do(context.Background(), op)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State)
			require.Zero(t, submits(srv, "k"), "submits after a manual resolution")
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for _, b := range behaviours {
				t.Run(b.name, func(t *testing.T) {
					store := st.open(t)
					t.Cleanup(func() { _ = store.Close() })
					srv, err := idemtest.NewServer()
					require.NoError(t, err)
					t.Cleanup(srv.Close)
					b.run(t, store, srv)
				})
			}
		})
	}
}

func newClient(t testing.TB, store idem.Store, srv *idemtest.Server, opts ...idem.Option) *idem.Client {
	t.Helper()
	c, err := idem.New(store, append([]idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithResultEndpoint(srv.ResultTemplate())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func order(srv *idemtest.Server, key string) idem.Request {
	return idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)}
}
