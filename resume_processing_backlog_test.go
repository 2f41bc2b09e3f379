package idem_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Bank debits stay "processing" for days after the server accepts them
// (Stripe's ACH Direct Debit PaymentIntents: up to 4 business days;
// SEPA Direct Debit: up to 14). A restart finds them open, and Resume,
// which the service awaits before it takes new work, polled each one as a
// waiting caller would: five queries and about 7.5 s of backoff per
// operation, an hour and a half of start-up for 6,000 of them, on every
// deploy, for answers only days can change. Once the host's visits, as
// many in a row as mark a host unreachable, have waited for nothing,
// Resume asks about the rest once and leaves them to Run. Default
// settings but the clock.
func TestResumeLeavesProcessingToRun(t *testing.T) {
	const n = 200
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, idemtest.WithClock(clock.Now))
	const settles = 12 * time.Hour // inside the fake server's 24-hour key window
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Count: n, Delay: settles}))
	open, closeAll := restarts(t, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock),
		idem.WithResultEndpoint(srv.URL+"/operations/{key}"))
	queries := func() map[string]int {
		out := map[string]int{}
		for _, r := range srv.Requests() {
			if r.Method == http.MethodGet {
				out[r.Key]++
			}
		}
		return out
	}

	// Accepted, processing: one answer each, so that the set-up spends no
	// clock.
	store, c := open(idem.WithMaxAttempts(1))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("debit-%02d", i)
		res, err := c.Submit(t.Context(), idem.Request{Key: keys[i], URL: srv.URL + "/orders", Body: fmt.Appendf(nil, `{"debit":%d}`, i)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, keys[i])
		require.Equal(t, idem.StateProcessing, res.State, keys[i])
	}
	closeAll(store, c)

	store, c = open()
	before := queries()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: n, Processing: n}, sum)
	after := queries()
	// The visits under way when the streak ends still wait: up to a
	// concurrency's worth beyond it.
	waited := 2*idem.DefaultResumeConcurrency + idem.DefaultResumeConcurrency - 1
	var once []string
	for _, k := range keys {
		q := after[k] - before[k]
		require.LessOrEqual(t, q, idem.DefaultMaxAttempts, "result queries for %s during Resume", k)
		if q == 1 {
			once = append(once, k)
		}
	}
	require.GreaterOrEqual(t, len(once), n-waited, "operations Resume asked about once")
	for _, k := range once {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equal(t, idem.StateProcessing, rec.State, k)
		require.Empty(t, rec.Review, k)
		// On Run's schedule, judged from the query (the manual clock adds
		// up the waits of the visits that did wait).
		last := rec.Attempts[len(rec.Attempts)-1]
		require.GreaterOrEqual(t, rec.NextDue.Sub(last.Start), idem.DefaultReconcileInterval/2,
			"%s: Run's next pass would ask again at once", k)
	}
	closeAll(store, c)

	// The debits clear: the next start-up settles every one, executed once.
	clock.Advance(settles)
	resumeSettlesAll(t, open, closeAll, srv, keys)
}

// keyGate holds the submits of one key until release is closed, so that a
// test can join a caller to the call sending it; other requests pass.
type keyGate struct {
	base    http.RoundTripper
	key     string
	entered chan struct{}
	release chan struct{}
}

func (g *keyGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Header.Get("Idempotency-Key") == g.key {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.base.RoundTrip(req)
}

// Once Resume leaves a host's processing operations to Run without
// waiting for them, a Do joined to such a visit (a client retrying its
// order with the same draft id while the service starts) got the visit's
// hand-off, processing, at once: "Do drives until it settles or the
// call's budget is spent", and its own budget, in which this order
// settles, was untouched.
func TestForegroundJoinerOfBriefResumeVisitKeepsItsBudget(t *testing.T) {
	g := &keyGate{key: "z", entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnv(t, clientOpts(idem.WithHTTPClient(&http.Client{Transport: g})))
	g.base = e.srv.Client().Transport
	giveUp := 2 * idem.DefaultResumeConcurrency
	for i := range giveUp + idem.DefaultResumeConcurrency {
		k := fmt.Sprintf("debit-%02d", i)
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: k, Delay: 12 * time.Hour}))
		res, err := e.client.Submit(e.ctx, e.req(k, `{}`))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, k)
		require.Equal(t, idem.StateProcessing, res.State, k)
	}
	e.clock.Advance(10 * time.Minute) // "z" comes last in Resume's order (NextDue)
	_, err := e.client.Prepare(e.ctx, e.req("z", `{}`))
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "z", Delay: 5 * time.Second}))

	resumed := make(chan error, 1)
	go func() {
		_, err := e.client.Resume(e.ctx)
		resumed <- err
	}()
	select {
	case <-g.entered: // Resume is sending "z"
	case <-time.After(time.Minute):
		t.Fatal("Resume never sent z")
	}
	done := doJoined(t, e, "z")
	close(g.release)
	require.NoError(t, within(t, resumed, "Resume"))
	got := within(t, done, "Do")
	require.NoError(t, got.err, "Do returned Resume's hand-off")
	require.Equal(t, idem.StateSucceeded, got.res.State)
	require.Len(t, e.submits("z"), 1)
	require.Equal(t, 1, e.srv.Effects(scope, "z"))
}
