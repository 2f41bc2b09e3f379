package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/journal"
)

// days is a positive duration flag that also takes whole days ("30d"),
// the unit operators think in for retention.
type days struct {
	d   time.Duration
	set bool
}

func (v *days) String() string {
	if v == nil || !v.set {
		return ""
	}
	return v.d.String()
}

func (v *days) Set(s string) error {
	d, err := parseDays(s)
	if err != nil {
		return err
	}
	v.d, v.set = d, true
	return nil
}

func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		i, err := strconv.Atoi(n)
		if err != nil || i <= 0 || i > 100*365 {
			return 0, fmt.Errorf("invalid duration %q: want a Go duration (720h) or a whole number of days (30d)", s)
		}
		return time.Duration(i) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a Go duration (720h) or a whole number of days (30d)", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("invalid duration %q: must be positive", s)
	}
	return d, nil
}

// states is a flag that collects states, comma-separated or repeated.
type states []journal.State

func (v *states) String() string {
	if v == nil {
		return ""
	}
	parts := make([]string, len(*v))
	for i, s := range *v {
		parts[i] = string(s)
	}
	return strings.Join(parts, ",")
}

func (v *states) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		st := journal.State(strings.ToLower(strings.TrimSpace(part)))
		if !st.Valid() {
			return fmt.Errorf("unknown state %q: want pending, processing, unknown, succeeded or failed", part)
		}
		*v = append(*v, st)
	}
	return nil
}

// openStates are the states that are not terminal.
var openStates = []journal.State{journal.StatePending, journal.StateProcessing, journal.StateUnknown}

// allStates are the states in the order an operation usually meets them.
var allStates = []journal.State{
	journal.StatePending, journal.StateProcessing, journal.StateUnknown,
	journal.StateSucceeded, journal.StateFailed,
}
