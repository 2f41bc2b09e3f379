package pgjournal_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
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

// TestResolveWhileReplicaSends: an operator settles an operation by hand
// ("failed": stuck, and the customer says there was no charge) while
// replica B's request for it is on the wire, from a Submit or from Run
// sending an outbox operation. The server then executes the order and
// answers. Whether the operator resolved through another replica's Client
// (no lease) or with idem -dsn resolve -force (pgjournal/cmd/idem: the
// tool takes B's lease over, then resolves under its own, which fences
// B's writes), the resolution is kept and B's answer is recorded beside
// it, contradicting it: flagged for review, one order on the server. With
// -force the answer was dropped without a trace (B's write refused): the
// journal said "failed, by hand", unflagged, over an order the server
// made.
func TestResolveWhileReplicaSends(t *testing.T) {
	resolvers := []struct {
		name    string
		resolve func(t *testing.T, ctx context.Context, a *idem.Client, as *pgjournal.Store, scope string)
	}{
		{"another replica's Resolve -force", func(t *testing.T, ctx context.Context, a *idem.Client, _ *pgjournal.Store, scope string) {
			// Forced: without it, Resolve refuses B's live lease
			// (TestResolveRefusedWhileReplicaSends).
			_, err := a.Resolve(ctx, scope, "k", idem.Resolution{State: idem.StateFailed, By: "ops", Reason: "stuck; customer says no charge", Force: true})
			require.NoError(t, err, "Resolve()")
		}},
		{"resolve -force", func(t *testing.T, ctx context.Context, _ *idem.Client, as *pgjournal.Store, scope string) {
			now := time.Now()
			_, l, err := as.TakeOver(ctx, scope, "k", "idem-cli@ops", now, now.Add(idem.DefaultLeaseDuration))
			require.NoError(t, err, "TakeOver()")
			_, err = as.Resolve(journal.WithLease(ctx, l), scope, "k", journal.Manual{
				State: journal.StateFailed, By: "ops", Reason: "stuck; customer says no charge", At: now,
			})
			require.NoError(t, err, "Resolve() under the tool's lease")
		}},
	}
	senders := []struct {
		name string
		// send starts B's request for "k" to url and returns a func that
		// waits until B is done with it.
		send func(t *testing.T, ctx context.Context, b *idem.Client, bs *pgjournal.Store, url string) (wait func())
	}{
		{"Submit", func(t *testing.T, ctx context.Context, b *idem.Client, _ *pgjournal.Store, url string) func() {
			type outcome struct {
				res *idem.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := b.Submit(ctx, idem.Request{Key: "k", URL: url, Body: []byte(`{"amount":1}`)})
				done <- outcome{res, err}
			}()
			return func() {
				got := <-done
				require.NotNil(t, got.res, "Submit() result (err %v)", got.err)
				// The journal's final word, not "unknown: another
				// replica took over"; contradicted by the server's
				// answer, so not a failure to retry under a new key.
				require.Equal(t, idem.StateFailed, got.res.State, "Submit() state")
				require.Equal(t, idem.ReviewConfirmConflict, got.res.Review, "Submit() review")
				require.NotErrorIs(t, got.err, idem.ErrFailed, "Submit()")
				require.ErrorIs(t, got.err, idem.ErrNeedsReview, "Submit()")
				require.ErrorIs(t, got.err, idem.ErrUnknownOutcome, "Submit()")
				require.Equal(t, http.StatusCreated, got.res.StatusCode, "Submit(): the server's answer")
			}
		}},
		{"Run", func(t *testing.T, ctx context.Context, b *idem.Client, bs *pgjournal.Store, url string) func() {
			pool, err := pgxpool.New(ctx, dsn(t))
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := bs.PrepareTx(ctx, tx, b, idem.Request{Key: "k", URL: url, Body: []byte(`{"amount":1}`)})
				return err
			}), "the business transaction with the intent")
			run := startRun(t, b)
			return func() {
				waitFor(t, "B's answer recorded", func() bool {
					op, err := b.Lookup(ctx, "", "k")
					return err == nil && len(op.Confirmations) > 0
				})
				run.end()
			}
		}},
	}
	for _, sd := range senders {
		for _, rs := range resolvers {
			t.Run(sd.name+", "+rs.name, func(t *testing.T) {
				ctx := context.Background()
				schema := openStore(t).Schema()
				srv, err := idemtest.NewServer()
				require.NoError(t, err)
				t.Cleanup(srv.Close)
				proxyURL, arrived, release := heldProxy(t, srv.URL)
				a, as := replica(t, ctx, schema, "replica-a", srv)
				b, bs := replica(t, ctx, schema, "replica-b", srv, idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))

				wait := sd.send(t, ctx, b, bs, proxyURL+"/orders")
				<-arrived
				op, err := a.Lookup(ctx, "", "k")
				require.NoError(t, err)
				rs.resolve(t, ctx, a, as, op.Scope)
				close(release)
				wait()

				op, err = a.Lookup(ctx, "", "k")
				require.NoError(t, err)
				require.Equal(t, idem.StateFailed, op.State, "the resolution is kept")
				require.Equal(t, idem.ReviewConfirmConflict, op.Review, "review: the server's answer contradicts the resolution")
				require.Len(t, op.Confirmations, 1, "the server's answer, recorded")
				require.Equal(t, idem.ResponseSource, op.Confirmations[0].Source)
				require.Equal(t, idem.StateSucceeded, op.Confirmations[0].State)
				require.Equal(t, "ord_000001", op.Confirmations[0].ResourceID)
				require.Equal(t, 1, submits(srv, "k"), "submits")
				require.Equal(t, 1, srv.Effects("", "k"), "orders the server made")
			})
		}
	}
}

// TestResolveRefusedWhileReplicaSends: replica A's operator resolves "k"
// "failed" while replica B's Submit of it is on the wire. A's Resolve took
// no lease and wrote it; the customer, told "failed", paid again under a
// new key while B's request executed: 2 orders. It is now refused under
// B's live lease, nothing written, naming B; B settles succeeded, 1 order.
func TestResolveRefusedWhileReplicaSends(t *testing.T) {
	ctx := context.Background()
	schema := openStore(t).Schema()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	proxyURL, arrived, release := heldProxy(t, srv.URL)
	// Let B's request go on any exit, or the proxy's Close waits for it.
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	a, _ := replica(t, ctx, schema, "replica-a", srv)
	b, _ := replica(t, ctx, schema, "replica-b", srv)

	type outcome struct {
		res *idem.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Submit(ctx, idem.Request{Key: "k", URL: proxyURL + "/orders", Body: []byte(`{"amount":1}`)})
		done <- outcome{res, err}
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("B's request never reached the server")
	}
	_, err = a.Resolve(ctx, "", "k", idem.Resolution{State: idem.StateFailed, By: "ops", Reason: "stuck; customer says no charge"})
	require.ErrorIs(t, err, journal.ErrLeased, "Resolve() under B's lease")
	require.ErrorContains(t, err, "replica-b")
	op, err := a.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.False(t, op.State.Terminal(), "state %s: nothing written", op.State)
	let()
	var got outcome
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("B's Submit never ended")
	}
	require.NoError(t, got.err, "B's Submit()")
	require.Equal(t, idem.StateSucceeded, got.res.State)
	op, err = a.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.False(t, op.Result.Manual, "no resolution recorded")
	require.Equal(t, 1, submits(srv, "k"), "submits")
	require.Equal(t, 1, srv.Effects("", "k"), "orders the server made")
}
