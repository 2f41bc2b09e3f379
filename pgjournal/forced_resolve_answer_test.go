package pgjournal_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// heldProxy passes requests to target, holding each POST until the test
// lets it go: the request is on the wire, the server has not seen it.
func heldProxy(t *testing.T, target string) (srvURL string, arrived <-chan struct{}, release chan<- struct{}) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	in, out := make(chan struct{}, 1), make(chan struct{})
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			in <- struct{}{}
			<-out
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.Close)
	return ps.URL, in, out
}

// TestForcedResolveKeepsTheAnswer: an operator settles an operation by
// hand while a replica's request for it is on the wire, as idem -dsn
// resolve -force does (pgjournal/cmd/idem: TakeOver, then Resolve under
// the tool's lease, which fences the replica). The server then executes
// the order and answers. The replica's write of that answer is refused,
// as it must be, but the answer itself was dropped without a trace: the
// journal said "failed, by hand", unflagged, over an order the server
// made. It is recorded beside the resolution (Confirm takes no lease and
// never overwrites an outcome), and the contradiction is flagged for
// review, as it is after a lease-less Resolve.
func TestForcedResolveKeepsTheAnswer(t *testing.T) {
	ctx := context.Background()
	schema := openStore(t).Schema()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	proxyURL, arrived, release := heldProxy(t, srv.URL)
	b, bs := replica(t, ctx, schema, "replica-b", srv)

	req := idem.Request{Key: "k", URL: proxyURL + "/orders", Body: []byte(`{"amount":1}`)}
	type outcome struct {
		res *idem.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Submit(ctx, req)
		done <- outcome{res, err}
	}()
	<-arrived

	op, err := b.Lookup(ctx, "", "k")
	require.NoError(t, err)
	now := time.Now()
	_, l, err := bs.TakeOver(ctx, op.Scope, "k", "idem-cli@ops", now, now.Add(idem.DefaultLeaseDuration))
	require.NoError(t, err, "TakeOver()")
	_, err = bs.Resolve(journal.WithLease(ctx, l), op.Scope, "k", journal.Manual{
		State: journal.StateFailed, By: "ops", Reason: "stuck; customer says no charge", At: now,
	})
	require.NoError(t, err, "Resolve() under the tool's lease")
	close(release)
	got := <-done
	require.NotNil(t, got.res, "Submit() result (err %v)", got.err)
	// The journal's final word, not "unknown: another replica took over".
	require.Equal(t, idem.StateFailed, got.res.State, "Submit() state")
	require.ErrorIs(t, got.err, idem.ErrFailed, "Submit()")
	require.Equal(t, 1, srv.Effects("", "k"), "orders the server made")

	op, err = b.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, op.State, "the resolution is kept")
	require.Equal(t, idem.ReviewConfirmConflict, op.Review, "review: the server's answer contradicts the resolution")
	require.Len(t, op.Confirmations, 1, "the server's answer, recorded")
	require.Equal(t, idem.ResponseSource, op.Confirmations[0].Source)
	require.Equal(t, idem.StateSucceeded, op.Confirmations[0].State)
	require.Equal(t, "ord_000001", op.Confirmations[0].ResourceID)
	require.Equal(t, 1, submits(srv, "k"), "submits")
}
