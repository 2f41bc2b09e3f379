package cli

import (
	"fmt"

	"github.com/idemkit/idem/journal"
)

// statsJSON is the JSON form of stats; its field names are part of idem's
// command-line interface.
type statsJSON struct {
	Journal  string                `json:"journal"`
	ByState  map[journal.State]int `json:"by_state"`
	Open     int                   `json:"open"`
	Review   int                   `json:"review"`
	Total    int                   `json:"total"`
	FileSize int64                 `json:"file_size"`
	// Newer: records written by a newer idem (journal.Stats).
	Newer int `json:"newer_records"`
	// NewerOpen: those of Newer that are open (journal.Stats).
	NewerOpen int `json:"newer_open_records"`
}

func cmdStats(e *env, args []string) (err error) {
	const name = "stats"
	fs := e.flags(name)
	asJSON := fs.Bool("json", false, "print the counts as JSON")
	if err := e.parseNoArgs(fs, args); err != nil {
		return err
	}
	var (
		st      journal.Stats
		where   string // the journal's path, or the backend's name
		heading string
	)
	b, err := e.backend(name)
	if err != nil {
		return err
	}
	if b != nil {
		defer closeBackend(b, &err)
		if st, err = b.Stats(e.ctx); err != nil {
			return err
		}
		where, heading = b.Where(), b.Heading(st)
	} else {
		s, err := e.open(name, false)
		if err != nil {
			return err
		}
		defer closeStore(s, &err)
		if st, err = s.Stats(e.ctx); err != nil {
			return explain(s.Path(), err)
		}
		where = s.Path()
		heading = fmt.Sprintf("journal %s (%s)", clean(where), size(st.FileSize))
	}
	if *asJSON {
		out := statsJSON{Journal: where, ByState: map[journal.State]int{}, Open: st.Open,
			Review: st.Review, Total: st.Total, FileSize: st.FileSize, Newer: st.Newer, NewerOpen: st.NewerOpen}
		for _, state := range allStates {
			out.ByState[state] = st.ByState[state]
		}
		return writeJSON(e.stdout, out)
	}
	fmt.Fprintln(e.stdout, heading)
	line := func(label string, n int) { fmt.Fprintf(e.stdout, "  %-18s %9d\n", label, n) }
	for _, state := range allStates {
		line(string(state), st.ByState[state])
	}
	line("open", st.Open)
	line("flagged for review", st.Review)
	line("total", st.Total)
	if st.Newer > 0 {
		// Counted in total only: this build cannot read their state.
		line("by a newer idem", st.Newer)
		line("  of them open", st.NewerOpen)
		fmt.Fprintln(e.stdout, "  (idem was rolled back: nothing settles these until the newer idem runs again; "+
			"its idem command shows them)")
	}
	return nil
}

// Size prints a byte count as stats does.
func Size(n int64) string { return size(n) }

// size prints a byte count for people: 512 B, 32.0 KiB, 1.5 MiB.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
