package idem_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestSoak runs many operations through seeded random faults, with the
// default retry budget, then lets Resume settle what the foreground left,
// and checks the promise: at most one side effect per key, exactly one for
// every succeeded operation, none for a failed one, and nothing left open
// without a reason.
func TestSoak(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	const retention = 1000 * time.Hour // fake time runs fast under many sleepers
	e := newEnv(t,
		serverOpts(idemtest.WithSeed(20261129), idemtest.WithRetention(retention), idemtest.WithProfile(idemtest.Profile{
			Rates: map[idemtest.FaultKind]float64{
				idemtest.DropAfterCommit:   0.05,
				idemtest.ErrorAfterCommit:  0.05,
				idemtest.ErrorBeforeCommit: 0.05,
				idemtest.Throttle:          0.03,
				idemtest.Unavailable:       0.03,
				idemtest.QueryLag:          0.05,
				idemtest.SlowProcessing:    0.05,
				idemtest.GarbageBody:       0.03,
				idemtest.TruncatedBody:     0.02,
				idemtest.DelayResponse:     0.01,
				idemtest.Decline:           0.02,
			},
			Delay:      3 * time.Second,
			RetryAfter: 2 * time.Second,
		})),
		// The retry budget is the default one.
		clientOpts(idem.WithKeyRetention(retention), idem.WithAttemptTimeout(300*time.Millisecond)),
	)

	keys := make([]string, n)
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				res, err := e.client.Submit(e.ctx, e.req(keys[i], fmt.Sprintf(`{"order":%d}`, i)))
				if err == nil && res.State != idem.StateSucceeded {
					t.Errorf("Submit(%s) = %s with nil error", keys[i], res.State)
				}
			}
		}()
	}
	for i := range keys {
		keys[i] = fmt.Sprintf("soak-%04d", i)
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	e.settleByRestarts()

	stats := e.srv.Stats()
	require.LessOrEqual(t, stats.MaxEffectsPerKey, 1, "max_effects_per_key")
	states := map[idem.State]int{}
	var duplicates, lost, wronglyFailed, wronglySucceeded int
	for _, k := range keys {
		rec := e.record(k)
		states[rec.State]++
		effects := e.srv.Effects(scope, k)
		duplicates += max(0, effects-1)
		switch {
		case rec.State == idem.StateSucceeded:
			if effects != 1 || rec.Result.ResourceID == "" {
				wronglySucceeded++
				t.Errorf("%s succeeded with %d side effects, resource %q", k, effects, rec.Result.ResourceID)
			}
		case rec.State == idem.StateFailed:
			if effects != 0 {
				wronglyFailed++
				t.Errorf("%s failed (declined) with %d side effects", k, effects)
			}
		case rec.Review == "":
			lost++
			t.Errorf("%s left %s without a review reason", k, rec.State)
		}
	}
	figures := fmt.Sprintf("operations=%d duplicates=%d lost=%d wrongly_failed=%d wrongly_succeeded=%d max_submits_after_final=%d",
		n, duplicates, lost, wronglyFailed, wronglySucceeded, stats.MaxSubmitsAfterFinal)
	t.Log(figures)
	fmt.Println("soak:", figures)
	t.Logf("states %v; server %+v", states, stats)
	require.Zero(t, duplicates+lost+wronglyFailed+wronglySucceeded, figures)
	// A replay whose answer is lost or unreadable again (the faults
	// stack: drops, garbage, truncation, an attempt timeout on a loaded
	// machine) costs one more submit, within the call's budget: 1–2 on a
	// quiet machine, 4 once under CI's load. A client resending a key
	// whose answer cannot change, in a loop, would pass the budget.
	require.LessOrEqual(t, stats.MaxSubmitsAfterFinal, idem.DefaultMaxAttempts-1, "submits of one key after its answer was final")
	require.Equal(t, n, states[idem.StateSucceeded]+states[idem.StateFailed], "all settled once the faults stop")
	require.Equal(t, stats.SideEffects, states[idem.StateSucceeded], "no side effect outside a succeeded operation")
}
