package idem_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A Solidgate payment endpoint ignores the key ("A value of ignored means
// the endpoint does not", https://api-docs.solidgate.com/api/v2/idempotent-requests)
// and charges every request. x, sent there once, is flagged
// ReviewKeyIgnored, and every save of the endpoint fails (the disk full,
// ENOSPC): the flag is the endpoint's one trace on disk. Reviewer r131
// asked whether a visit of x could replace that flag with another reason
// (the key window over, the reconciliation deadline passed, the clock
// stepped back): the next process would then know nothing of the
// endpoint and resend l, another payment there whose answer was lost,
// under the same key: a second charge. None does: flagBlock reads
// ReviewKeyIgnored before any clock, pastDeadline flags only what is not
// flagged yet, an expired key does not replace it (outlivesExpiry), and
// no result query is asked while the endpoint is unjournaled. x keeps
// its flag, nothing is sent, and the next process flags l (charged:
// none).
func TestKeyIgnoredFlagWhoseSaveFailedOutlivesOtherReasons(t *testing.T) {
	start := time.Now()
	for _, tt := range []struct {
		name  string
		clock time.Time // process 1's at its start
		visit func(t *testing.T, c *idem.Client, clk *idemtest.Clock)
		// x has a status endpoint, answering 410 Gone (the key expired)
		status bool
	}{
		{"Resume past the key window", start.Add(idem.DefaultKeyRetention + time.Hour), resumeX, false},
		{"Do past the key window", start.Add(idem.DefaultKeyRetention + time.Hour), doX, false},
		{"Resume with the clock stepped back", start.Add(-time.Hour), resumeX, false},
		{"Do with the clock stepped back", start.Add(-time.Hour), doX, false},
		{"Run past the reconciliation deadline", start.Add(idem.DefaultReconcileDeadline + time.Hour), runOverX, false},
		{"Resume past the key window, status 410", start.Add(idem.DefaultKeyRetention + time.Hour), resumeX, true},
		{"Run past the reconciliation deadline, status 410", start.Add(idem.DefaultReconcileDeadline + time.Hour), runOverX, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, ignoredCreated)
			charge := s.srv.URL + "/api/v1/charge"
			path := filepath.Join(t.TempDir(), "idem.journal")
			js, err := journal.Open(path)
			require.NoError(t, err)
			orders := ""
			if tt.status {
				orders = s.srv.URL + "/api/v1/orders"
				s.result = func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) }
			}
			journalSentOnce(t, js, "x", idem.ReviewKeyIgnored, charge, orders)
			before, err := js.Get(t.Context(), idem.DefaultScope, "x")
			require.NoError(t, err)
			clk := idemtest.NewClock(tt.clock)
			saves := &failingKeyIgnoringSave{Store: js, fail: 1 << 20}
			c, err := idem.New(saves, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clk))
			require.NoError(t, err)
			tt.visit(t, c, clk)
			require.NoError(t, c.Close())
			require.NotZero(t, saves.failures.Load(), "saves of the endpoint tried (each failed)")
			kept, err := js.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, err)
			require.Empty(t, kept, "journal: endpoints ignoring the key, every save failed")
			x, err := js.Get(t.Context(), idem.DefaultScope, "x")
			require.NoError(t, err)
			require.True(t, x.Open(), "journal: x open")
			require.Equal(t, idem.ReviewKeyIgnored, x.Review, "journal: x's flag, the endpoint's one trace")
			require.NotEqual(t, before.Updated, x.Updated, "journal: x visited")
			require.Len(t, x.Attempts, 1, "journal: x's attempts, its one send")
			require.Empty(t, s.charged(), "charges, by key, in process 1")
			require.Zero(t, s.queries, "status queries in process 1: each answer would settle or flag x")
			// l, lost there meanwhile (journaled by a process that never
			// learnt the endpoint), is what the next process must not resend.
			journalSentOnce(t, js, "l", "", charge, "")
			require.NoError(t, js.Close())

			resumeWithoutResendingL(t, s, path)
		})
	}
}

// resumeX runs Resume, which visits x. With a status endpoint, the
// visit's failed save of the endpoint is a journal error, Resume's.
func resumeX(t *testing.T, c *idem.Client, _ *idemtest.Clock) {
	_, err := c.Resume(t.Context())
	if err != nil {
		require.ErrorIs(t, err, syscall.ENOSPC, "Resume()")
	}
}

func doX(t *testing.T, c *idem.Client, _ *idemtest.Clock) {
	_, err := c.Do(t.Context(), &idem.Operation{Key: "x"})
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do(x)")
}

// runOverX runs Run until its loop first waits past a minute on clk:
// x, due at once, has been visited by then.
func runOverX(t *testing.T, c *idem.Client, clk *idemtest.Clock) {
	held, release := clk.HoldFrom(clk.Now().Add(time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	select {
	case <-held:
	case err := <-ran:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not reach its wait past a minute")
	}
	cancel()
	release()
	select {
	case err := <-ran:
		require.True(t, errors.Is(err, context.Canceled), "Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return once cancelled")
	}
}
