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
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
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
	once := 0
	for _, k := range keys {
		q := after[k] - before[k]
		require.LessOrEqual(t, q, idem.DefaultMaxAttempts, "result queries for %s during Resume", k)
		if q == 1 {
			once++
		}
	}
	require.GreaterOrEqual(t, once, n-waited, "operations Resume asked about once")
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equal(t, idem.StateProcessing, rec.State, k)
		require.Empty(t, rec.Review, k)
		// On Run's schedule (the manual clock adds up the visits' waits,
		// so each is judged from its own last query).
		last := rec.Attempts[len(rec.Attempts)-1]
		require.GreaterOrEqual(t, rec.NextDue.Sub(last.Start), idem.DefaultReconcileInterval/2,
			"%s: Run's next pass would ask again at once", k)
	}
	closeAll(store, c)

	// The debits clear: the next start-up settles every one, executed once.
	clock.Advance(settles)
	resumeSettlesAll(t, open, closeAll, srv, keys)
}
