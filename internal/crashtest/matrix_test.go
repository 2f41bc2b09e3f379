package crashtest_test

import (
	"net/http"
	"strings"
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
		})
	}
}

// requireRowHolds asserts every promise the matrix checks.
func requireRowHolds(t *testing.T, row crashtest.Row) {
	t.Helper()
	require.Empty(t, row.Problems, "broken promises")
	require.Zero(t, row.Duplicates, "duplicates")
	require.Zero(t, row.Lost, "lost")
	require.Zero(t, row.WronglyFailed, "wrongly failed")
	require.Zero(t, row.WronglySucceeded, "wrongly succeeded")
	require.LessOrEqual(t, row.MaxAfterFinal, crashtest.MaxSubmitsAfterFinal, "submits of one key after its answer was final")
	require.Equal(t, row.Ops, row.Succeeded+row.Failed+row.Review, "settled or flagged after Resume")
}

// TestFaultMatrixCatchesABrokenClassifier shows that a server behaviour can
// make a client fail and that the matrix says so. The classifier reads 500
// as "throttled: resend". Against a server that does not store errors that
// does no harm: the resend gets the stored result. Against one that stores
// the 500 and replays it for the key's life, every resend gets the 500
// again, and the matrix reports the key resent after its answer was final,
// where the default classifier passes.
func TestFaultMatrixCatchesABrokenClassifier(t *testing.T) {
	broken := idem.WithClassifier(func(status int) idem.Verdict {
		if status == http.StatusInternalServerError {
			return idem.Throttled
		}
		return idem.DefaultClassifier(status)
	})
	scenario := func(b idemtest.Behavior, opts ...idem.Option) crashtest.Scenario {
		for _, sc := range crashtest.Scenarios(b) {
			if sc.Name == string(idemtest.ErrorAfterCommit) {
				sc.ClientOptions = opts
				return sc
			}
		}
		t.Fatalf("no %s row", idemtest.ErrorAfterCommit)
		return crashtest.Scenario{}
	}
	const ops = 10
	run := func(sc crashtest.Scenario) crashtest.Row {
		t.Helper()
		row, err := crashtest.RunScenario(t.Context(), sc, ops, 7, t.TempDir())
		require.NoError(t, err)
		t.Logf("%s %s: %+v", row.Behavior, row.Scenario, row)
		return row
	}

	// Under the IETF draft the same classifier makes no duplicate and
	// settles everything right (its resends may meet the fault again, so
	// their number is left alone); the default classifier passes under
	// stored-errors. The failure below is the broken classifier meeting
	// stored errors.
	row := run(scenario(idemtest.IETFDraft(), broken))
	require.Zero(t, row.Duplicates+row.Lost+row.WronglyFailed+row.WronglySucceeded, "duplicates, lost, wrongly failed or succeeded under the IETF draft")
	require.Equal(t, ops, row.Succeeded)
	requireRowHolds(t, run(scenario(idemtest.StoredErrors())))

	row = run(scenario(idemtest.StoredErrors(), broken))
	require.Greater(t, row.MaxAfterFinal, crashtest.MaxSubmitsAfterFinal, "submits of one key after its answer was final")
	require.NotEmpty(t, row.Problems)
	found := false
	for _, p := range row.Problems {
		found = found || strings.Contains(p, "submits after the server's answer was final")
	}
	require.True(t, found, "a problem names the resends: %q", row.Problems)
}
