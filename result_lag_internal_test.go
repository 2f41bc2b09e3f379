package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestResultLagging: the lag counts from the end of the last send that
// may have placed the order; a send that surely was not (refused, never
// written) does not count; one the clock finds in the future (stepped
// back since) keeps the lag from looking over; one an earlier process
// journaled counts from this one's birth at the earliest (its clock may
// have run slow then); 0 turns it off.
func TestResultLagging(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const lag, timeout = 2 * time.Minute, 10 * time.Second
	answered := journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Start: t0, Wrote: true, Done: true, Duration: time.Second}
	unwritten := journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Start: t0, Done: true}
	open := journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Start: t0} // the process stopped mid-attempt
	later := journal.Attempt{Number: 2, Kind: journal.AttemptSubmit, Start: t0.Add(time.Minute), Wrote: true, Done: true}
	refused := journal.Attempt{Number: 2, Kind: journal.AttemptSubmit, Start: t0.Add(time.Minute), Wrote: true, Done: true, Refused: true, Status: 400}
	query := journal.Attempt{Number: 2, Kind: journal.AttemptQuery, Start: t0.Add(time.Minute), Wrote: true, Done: true}
	for _, tt := range []struct {
		name     string
		attempts []journal.Attempt
		now      time.Time
		lag      time.Duration
		want     bool
		born     time.Time // zero: this process's own sends
	}{
		{"within the lag", []journal.Attempt{answered}, t0.Add(lag), lag, true, time.Time{}},
		{"past it, from the answer", []journal.Attempt{answered}, t0.Add(lag + time.Second), lag, false, time.Time{}},
		{"off", []journal.Attempt{answered}, t0, 0, false, time.Time{}},
		{"nothing written", []journal.Attempt{unwritten}, t0, lag, false, time.Time{}},
		{"never answered: counted from its timeout", []journal.Attempt{open}, t0.Add(lag + timeout - time.Millisecond), lag, true, time.Time{}},
		{"never answered, past it", []journal.Attempt{open}, t0.Add(lag + timeout), lag, false, time.Time{}},
		{"from the last send", []journal.Attempt{answered, later}, t0.Add(lag + 2*time.Second), lag, true, time.Time{}},
		{"a refused send places nothing", []journal.Attempt{answered, refused}, t0.Add(lag + 2*time.Second), lag, false, time.Time{}},
		{"a query places nothing", []journal.Attempt{answered, query}, t0.Add(lag + 2*time.Second), lag, false, time.Time{}},
		{"sent in the future: the clock stepped back", []journal.Attempt{answered}, t0.Add(-time.Hour), lag, true, time.Time{}},
		{"an earlier process's send counts from born", []journal.Attempt{answered}, t0.Add(5*time.Minute + time.Minute), lag, true, t0.Add(5 * time.Minute)},
		{"an earlier process's send, past the lag from born", []journal.Attempt{answered}, t0.Add(5*time.Minute + lag), lag, false, t0.Add(5 * time.Minute)},
		{"a send after born counts from its own end", []journal.Attempt{answered, later}, t0.Add(lag + 2*time.Second), lag, true, t0.Add(30 * time.Second)},
		{"an open send of an earlier process ending after born", []journal.Attempt{open}, t0.Add(lag + timeout - time.Millisecond), lag, true, t0.Add(time.Second)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &journal.Record{Attempts: tt.attempts}
			require.Equal(t, tt.want, resultLagging(rec, tt.now, tt.born, wallView{}, tt.lag, timeout))
		})
	}
}
