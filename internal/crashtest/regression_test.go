package crashtest_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/internal/fakeserver"
	"github.com/idemkit/idem/journal"
)

// TestResumeAfterCrashRemembersMaybeSent: a process is killed after its
// submit reached the server and before the outcome was committed (crash
// point b), so the journal holds a submit attempt with no outcome: "maybe
// sent". The next process resumes it; the result endpoint answers 404
// (replica lag), and the caller's context ends at that moment. The
// operation was performed on the server, so it must be left unknown, not
// pending ("never sent"): closing the crashed attempt must keep it "maybe
// sent". (A regression test: the client once recorded it as not written.)
func TestResumeAfterCrashRemembersMaybeSent(t *testing.T) {
	key := crashtest.Key(0)
	srv := startServer(t, buildServer(t))
	srv.inject(t, fakeserver.Fault{Kind: fakeserver.QueryLag, Key: key, Delay: time.Hour})
	path := filepath.Join(t.TempDir(), "idem.journal")

	ch := startChild(t, envJournal+"="+path, envURL+"="+srv.URL, envMode+"=point", envPoint+"=b", envKey+"="+key)
	ch.wait(t, time.Minute, func(string) {})
	require.Truef(t, ch.killed(), "child died of SIGKILL; exit %v; stderr:\n%s", ch.err, ch.stderr)
	require.Equal(t, 1, srv.stats(t).SideEffects, "the server performed it")

	// The restarted process, in this one: its caller stops waiting as soon
	// as the result endpoint says 404.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	store, err := journal.Open(path)
	require.NoError(t, err)
	defer store.Close()
	rt := cancelOn404{base: newTransport(), cancel: cancel}
	c, err := idem.New(store, (&childProc{url: srv.URL}).options(rt)...)
	require.NoError(t, err)
	sum, err := c.Resume(ctx)
	require.ErrorIs(t, err, context.Canceled, "Resume() error")

	rec, err := store.Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	t.Logf("summary %+v; record state %s; attempts %+v", sum, rec.State, rec.Attempts)
	require.Equal(t, 1, srv.stats(t).SideEffects, "side effects")
	require.Zero(t, sum.Pending, "Resume() Summary.Pending (never sent) for an operation the server performed")
	require.Equal(t, idem.StateUnknown, rec.State, "state of an operation that may have been sent")
}

// cancelOn404 cancels the caller's context when a result query answers 404.
type cancelOn404 struct {
	base   http.RoundTripper
	cancel context.CancelFunc
}

func (t cancelOn404) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusNotFound {
		t.cancel()
	}
	return resp, err
}
