package idem_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// serverAndJournal starts a fake server and opens a bbolt journal, both
// closed at cleanup.
func serverAndJournal(t *testing.T) (*idemtest.Server, *journal.Store) {
	t.Helper()
	srv := newServer(t)
	j, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	return srv, j
}

// failingWrites is a Store whose Updates fail with err once armed (the
// answer to a submit has arrived), and which counts its Releases.
type failingWrites struct {
	idem.Store
	err      error
	armed    atomic.Bool
	releases atomic.Int32
}

func (s *failingWrites) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	if s.armed.Load() {
		return nil, s.err
	}
	return s.Store.Update(ctx, scope, key, fn)
}

func (s *failingWrites) Release(ctx context.Context, l journal.Lease) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, l)
}

// armAfterSubmit arms s as the first submit's answer reaches the client.
type armAfterSubmit struct {
	base http.RoundTripper
	s    *failingWrites
}

func (a *armAfterSubmit) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if r.Method == http.MethodPost {
		a.s.armed.Store(true)
	}
	return resp, err
}

// TestStalledJournalKeepsLease: a drive whose write of the server's
// answer fails because the Store gave up waiting for its database (an
// error matching context.DeadlineExceeded: the client's own journal
// contexts never end) does not then try to release its lease, which would
// hold the caller as long again on a database that is not answering; the
// lease expires by itself. A write that failed otherwise (a full disk)
// still gives the lease up. Either way the caller is told the outcome is
// unknown, and the order was placed once.
func TestStalledJournalKeepsLease(t *testing.T) {
	tests := []struct {
		name         string
		err          error
		wantReleases int32
	}{
		{"the database did not answer", fmt.Errorf("pgjournal: update %q: timeout: %w", "k", context.DeadlineExceeded), 0},
		{"the write failed", errors.New("write /var/lib/app/idem.journal: no space left on device"), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, j := serverAndJournal(t)
			s := &failingWrites{Store: j, err: tc.err}
			hc := *srv.Client()
			hc.Transport = &armAfterSubmit{base: hc.Transport, s: s}
			c, err := idem.New(s, idem.WithHTTPClient(&hc), idem.WithResultEndpoint(srv.ResultTemplate()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })

			_, err = c.Submit(context.Background(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose answer could not be journaled")
			require.ErrorIs(t, err, tc.err, "Submit() whose answer could not be journaled")
			require.Equal(t, tc.wantReleases, s.releases.Load(), "Release() calls")
			require.Equal(t, 1, srv.Effects("", "k"), "side effects")
		})
	}
}

// unacknowledgedCreate is a Store whose CreateClaimed commits the record
// and its lease but reports err (matching journal.ErrMaybeCommitted) with
// that lease, as a PostgreSQL journal does when the connection breaks or
// the wait ends after the commit was sent; it counts its Releases.
type unacknowledgedCreate struct {
	*journal.Store
	err      error
	after    func() // called once the record is committed
	releases atomic.Int32
}

func (s *unacknowledgedCreate) CreateClaimed(ctx context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error) {
	_, l, err := s.Store.CreateClaimed(ctx, rec, owner, expires)
	if err != nil {
		return nil, journal.Lease{}, err
	}
	if s.after != nil {
		s.after()
	}
	return nil, l, s.err
}

func (s *unacknowledgedCreate) Release(ctx context.Context, l journal.Lease) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, l)
}

// TestMaybeCreatedLease: Submit whose create may or may not have
// committed sends nothing, reports the outcome unknown, and gives up the
// lease the create took if it committed (the Store returns it with the
// error), so that nobody waits for it to expire: also when the caller's
// own deadline cut the create short, but not when the Store gave up
// waiting for its database (a release would wait as long again). Released,
// another owner claims the operation at once.
func TestMaybeCreatedLease(t *testing.T) {
	broken := fmt.Errorf("%w: unexpected EOF", journal.ErrMaybeCommitted)
	timedOut := fmt.Errorf("%w: timeout: %w", journal.ErrMaybeCommitted, context.DeadlineExceeded)
	tests := []struct {
		name         string
		err          error
		callerEnded  bool // the caller's context ends as the create commits
		wantReleases int32
	}{
		{"connection broke", broken, false, 1},
		{"caller's context ended", timedOut, true, 1},
		{"database did not answer", timedOut, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, j := serverAndJournal(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &unacknowledgedCreate{Store: j, err: tc.err}
			if tc.callerEnded {
				s.after = cancel
			}
			c, err := idem.New(s, idem.WithHTTPClient(srv.Client()), idem.WithResultEndpoint(srv.ResultTemplate()), idem.WithLease("a", idem.DefaultLeaseDuration))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })

			_, err = c.Submit(ctx, idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose create may not have committed")
			require.ErrorIs(t, err, journal.ErrMaybeCommitted, "Submit() whose create may not have committed")
			require.Equal(t, tc.wantReleases, s.releases.Load(), "Release() calls")
			require.Empty(t, srv.Requests(), "requests")

			now := time.Now()
			_, _, err = j.Claim(context.Background(), idem.DefaultScope, "k", "b", now, now.Add(time.Minute))
			if tc.wantReleases == 0 {
				require.ErrorIs(t, err, journal.ErrLeased, "another owner's Claim() of a lease kept")
			} else {
				require.NoError(t, err, "another owner's Claim() once the lease is given up")
			}
		})
	}
}
