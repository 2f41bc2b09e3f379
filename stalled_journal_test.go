package idem_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

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
			srv, err := idemtest.NewServer()
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			j, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = j.Close() })
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
