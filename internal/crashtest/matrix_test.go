package crashtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/crashtest"
)

// TestFaultMatrix runs a small fault matrix: under every fault alone and
// all of them mixed, no operation runs twice, none is lost and none is
// marked failed although the server performed it.
func TestFaultMatrix(t *testing.T) {
	ops := 20
	if testing.Short() {
		ops = 10
	}
	for n, sc := range crashtest.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			row, err := crashtest.RunScenario(t.Context(), sc, ops, int64(100+n), t.TempDir())
			require.NoError(t, err)
			require.Empty(t, row.Problems, "broken promises")
			require.Zero(t, row.Duplicates, "duplicates")
			require.Zero(t, row.Lost, "lost")
			require.Zero(t, row.WronglyFailed, "wrongly failed")
			require.Equal(t, ops, row.Succeeded+row.Failed+row.Review, "settled or flagged after Resume")
			if sc.Name == "none" {
				require.Equal(t, ops, row.Succeeded, "succeeded without faults")
				require.Equal(t, ops, row.Attempts, "one submit each without faults")
			}
			t.Logf("%+v", row)
		})
	}
}
