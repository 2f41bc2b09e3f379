package journal_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// Prunable says what Prune does, so that the idem command's dry run counts
// what a prune would delete.
func TestRecordPrunable(t *testing.T) {
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	tests := []struct {
		name string
		r    journal.Record
		want bool
	}{
		{"settled before", journal.Record{State: journal.StateSucceeded, Created: at(-3), FirstSent: at(-3), Settled: at(-2)}, true},
		{"settled at the cut-off", journal.Record{State: journal.StateFailed, Created: at(-3), Settled: at(0)}, false},
		{"open", journal.Record{State: journal.StateUnknown, Created: at(-3), Settled: at(-2)}, false},
		{"sent after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(-3), Settled: at(-2),
			Attempts: []journal.Attempt{{Number: 1, Start: at(-3)}, {Number: 2, Start: at(1)}}}, false},
		{"first sent after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(-3), FirstSent: at(1), Settled: at(-2)}, false},
		{"created after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(5), Settled: at(-2)}, false},
		{"updated after the cut-off", journal.Record{State: journal.StateSucceeded, Created: at(-3), Settled: at(-2), Updated: at(5)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.r.Prunable(t0))
		})
	}
}
