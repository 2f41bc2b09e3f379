package crashtest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
)

// TestFaultMatrix runs a small fault matrix under every server behaviour:
// under every fault alone and all of them mixed, no operation runs twice,
// none is lost, none is marked failed although the server performed it or
// succeeded without a side effect of its own, and none is resent more than
// a handful of times once the server's answer for it was final.
func TestFaultMatrix(t *testing.T) {
	ops := 20
	if testing.Short() {
		ops = 10
	}
	for _, b := range idemtest.Behaviors() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			runMatrix(t, b, ops)
		})
	}
}

// runMatrix runs every row of b's matrix with ops operations, one subtest
// each, and asserts its promises.
func runMatrix(t *testing.T, b idemtest.Behavior, ops int) {
	for n, sc := range crashtest.Scenarios(b) {
		t.Run(sc.Name, func(t *testing.T) {
			row, err := crashtest.RunScenario(t.Context(), sc, ops, int64(100+n), t.TempDir())
			require.NoError(t, err)
			t.Logf("%+v", row)
			requireRowHolds(t, row)
			if sc.Name == "none" {
				require.Equal(t, ops, row.Succeeded, "succeeded without faults")
				require.Equal(t, ops, row.Attempts, "one submit each without faults")
			}
		})
	}
}

// requireRowHolds asserts every promise the matrix checks. Where the
// server de-duplicates nothing (key-ignored) a second order idem flagged
// for a person is allowed; a silent one never is.
func requireRowHolds(t *testing.T, row crashtest.Row) {
	t.Helper()
	require.Empty(t, row.Problems, "broken promises")
	require.Zero(t, row.SilentDuplicates, "silent duplicates")
	if row.Behavior != idemtest.KeyIgnored().String() {
		require.Zero(t, row.Duplicates, "duplicates")
	}
	require.Zero(t, row.Lost, "lost")
	require.Zero(t, row.WronglyFailed, "wrongly failed")
	require.Zero(t, row.WronglySucceeded, "wrongly succeeded")
	require.LessOrEqual(t, row.MaxAfterFinal, crashtest.MaxSubmitsAfterFinal, "submits of one key after its answer was final")
	require.Equal(t, row.Ops, row.Succeeded+row.Failed+row.Review, "settled or flagged after Resume")
}

// TestFaultMatrixCatchesABrokenClassifier shows that a server behaviour can
// make a client fail and that the matrix says so. The classifier reads 417
// as "throttled: resend". Against a server that answers 422 to a key
// someone else used first, it never sees a 417 and does no harm; against
// one that answers 417 (conflict-417) it keeps resending after the
// server's final answer, where the default classifier stops.
func TestFaultMatrixCatchesABrokenClassifier(t *testing.T) {
	broken := idem.WithClassifier(func(status int) idem.Verdict {
		if status == http.StatusExpectationFailed {
			return idem.Throttled
		}
		return idem.DefaultClassifier(status)
	})
	scenario := func(b idemtest.Behavior, opts ...idem.Option) crashtest.Scenario {
		for _, sc := range crashtest.Scenarios(b) {
			if sc.Name == string(idemtest.Preempt) {
				sc.ClientOptions = opts
				return sc
			}
		}
		t.Fatalf("no %s row", idemtest.Preempt)
		return crashtest.Scenario{}
	}
	run := func(sc crashtest.Scenario) crashtest.Row {
		t.Helper()
		row, err := crashtest.RunScenario(t.Context(), sc, 10, 7, t.TempDir())
		require.NoError(t, err)
		t.Logf("%s %s: %+v", row.Behavior, row.Scenario, row)
		require.Positive(t, row.Preempted, "keys someone else used first")
		return row
	}

	// The failure below is the broken classifier meeting the 417: the same
	// classifier passes under the IETF draft, the default one under
	// conflict-417.
	requireRowHolds(t, run(scenario(idemtest.IETFDraft(), broken)))
	requireRowHolds(t, run(scenario(idemtest.Conflict417())))

	row := run(scenario(idemtest.Conflict417(), broken))
	require.NotEmpty(t, row.Problems, "the matrix reports the broken classifier")
	require.Positive(t, row.WronglySucceeded+row.WronglyFailed+row.Lost+row.Duplicates+max(0, row.MaxAfterFinal-crashtest.MaxSubmitsAfterFinal),
		"a broken promise in the row's figures")
}
