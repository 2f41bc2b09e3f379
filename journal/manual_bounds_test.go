package journal

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResolveBoundsItsFields: Resolve journaled whatever a Manual held (a
// 3 MiB reason, a By with a newline, a resource id that is not UTF-8);
// only the Client's Resolve checked, and the idem command and any other
// Store user went around it. The journal refuses them, as it refuses a
// confirmation's, and the record is left as it was.
func TestResolveBoundsItsFields(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	want, err := s.Create(ctx, rvRecord("x", rvT0))
	require.NoError(t, err)
	ok := Manual{State: StateFailed, Reason: "abandoned", By: "ops", At: rvT0}
	for name, change := range map[string]func(*Manual){
		"long reason":        func(m *Manual) { m.Reason = strings.Repeat("x", maxConfirmReason+1) },
		"long by":            func(m *Manual) { m.By = strings.Repeat("b", maxConfirmID+1) },
		"long resource id":   func(m *Manual) { m.ResourceID = strings.Repeat("r", maxConfirmResourceID+1) },
		"newline in by":      func(m *Manual) { m.By = "ann\nbob" },
		"tab in resource id": func(m *Manual) { m.ResourceID = "ord\t1" },
		"reason not UTF-8":   func(m *Manual) { m.Reason = "paid\xff" },
	} {
		m := ok
		change(&m)
		_, err := s.Resolve(ctx, "s", "x", m)
		require.ErrorIs(t, err, ErrInvalid, name)
		require.NoError(t, CheckManual(ok))
		require.ErrorIs(t, CheckManual(m), ErrInvalid, name)
	}
	got, err := s.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Equal(t, want, got)
	// At the bounds, it is journaled.
	m := ok
	m.Reason, m.By, m.ResourceID = strings.Repeat("x", maxConfirmReason), strings.Repeat("b", maxConfirmID), strings.Repeat("r", maxConfirmResourceID)
	_, err = s.Resolve(ctx, "s", "x", m)
	require.NoError(t, err)
}
