package idem_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestHugeDurationsKeepTheLease: a drive's lease reaches the attempt
// timeout plus the lease margin from now. WithAttemptTimeout or WithLease
// of math.MaxInt64 (for "no limit") overflowed that sum, so the lease of a
// call in flight expired before it was taken, and anyone (Run's ClaimDue
// among them) could claim the operation under the call and drive it a
// second time. The span saturates now.
func TestHugeDurationsKeepTheLease(t *testing.T) {
	for name, opt := range map[string]idem.Option{
		"WithAttemptTimeout": idem.WithAttemptTimeout(math.MaxInt64),
		"WithLease":          idem.WithLease("pod-1", math.MaxInt64),
	} {
		t.Run(name, func(t *testing.T) {
			store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
			require.NoError(t, err)
			t.Cleanup(func() { _ = store.Close() })
			arrived, release := make(chan struct{}), make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(arrived)
				<-release
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"state":"succeeded","resourceId":"ord_1"}`))
			}))
			t.Cleanup(srv.Close)
			c, err := idem.New(store, opt, idem.WithHTTPClient(srv.Client()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			done := make(chan error, 1)
			go func() {
				_, err := c.Submit(context.Background(), idem.Request{Key: "k1", URL: srv.URL + "/orders", Body: []byte(`{}`)})
				done <- err
			}()
			<-arrived
			now := time.Now()
			_, _, claimErr := store.Claim(context.Background(), idem.DefaultScope, "k1", "other", now, now.Add(time.Minute))
			close(release)
			require.NoError(t, <-done)
			require.True(t, errors.Is(claimErr, journal.ErrLeased), "another owner claimed the operation while a call drove it: Claim = %v; want ErrLeased", claimErr)
		})
	}
}

// gateClock is the wall clock, but its Sleep tells sleeping and then
// waits for wake (or ctx).
type gateClock struct{ sleeping, wake chan struct{} }

func (gateClock) Now() time.Time { return time.Now() }

func (g gateClock) Sleep(ctx context.Context, d time.Duration) error {
	g.sleeping <- struct{}{}
	select {
	case <-g.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestHugeDurationsKeepTheLeaseWhileWaiting: before a wait, a drive holds
// its lease for the wait plus the attempt timeout; with WithMaxElapsed of
// math.MaxInt64 ("no limit") and a backoff as long, that sum wrapped
// negative, the lease was taken to cover the wait already, and another
// owner could claim the operation while the call waited to resend it.
func TestHugeDurationsKeepTheLeaseWhileWaiting(t *testing.T) {
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts++ // one request at a time: the call waits between them
		if posts == 1 {
			w.WriteHeader(http.StatusTooManyRequests) // not executed: wait, resend
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"state":"succeeded","resourceId":"ord_1"}`))
	}))
	t.Cleanup(srv.Close)
	clk := gateClock{sleeping: make(chan struct{}), wake: make(chan struct{})}
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clk),
		idem.WithMaxElapsed(math.MaxInt64),
		idem.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(math.MaxInt64 - 5*time.Second) }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(context.Background(), idem.Request{Key: "k1", URL: srv.URL + "/orders", Body: []byte(`{}`)})
		done <- err
	}()
	select {
	case <-clk.sleeping:
	case err := <-done:
		t.Fatalf("Submit returned %v without waiting to resend", err)
	}
	// An hour into a wait of centuries, the call still holds the lease.
	now := time.Now().Add(time.Hour)
	_, _, claimErr := store.Claim(context.Background(), idem.DefaultScope, "k1", "other", now, now.Add(time.Minute))
	close(clk.wake)
	require.NoError(t, <-done)
	require.Equal(t, 2, posts)
	require.True(t, errors.Is(claimErr, journal.ErrLeased), "another owner claimed the operation while a call waited to resend it: Claim = %v; want ErrLeased", claimErr)
}
