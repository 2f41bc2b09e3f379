package crashtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/crashtest"
)

// TestWebhookRow: with no result endpoint and responses lost past the key
// window, the provider's events settle every operation they answer: no
// duplicate, nothing lost, nothing left in review that an event answered.
func TestWebhookRow(t *testing.T) {
	ops := 60
	if testing.Short() {
		ops = 20
	}
	row, err := crashtest.RunWebhookScenario(t.Context(), crashtest.DefaultWebhookScenario, ops, 5, t.TempDir())
	require.NoError(t, err)
	t.Logf("%+v", row)
	require.Empty(t, row.Problems, "broken promises")
	require.Zero(t, row.Duplicates, "duplicates")
	require.Zero(t, row.Lost, "lost")
	require.Zero(t, row.ReviewAnswered, "left in review although an event answered")
	require.Zero(t, row.Conflicts, "contradicting events")
	require.Positive(t, row.ReviewBefore, "flagged for review before the events: the row tests nothing without")
	require.Equal(t, row.ReviewBefore, row.Settled+row.ReviewUnanswered, "every flagged operation settled by an event, unless its events were lost")
	require.Positive(t, row.Redelivered, "redelivered events")
	require.Equal(t, ops, row.Succeeded+row.Failed+row.ReviewUnanswered)
}
