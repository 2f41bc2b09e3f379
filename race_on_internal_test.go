//go:build race

package idem

// raceEnabled: the race detector is on, and allocation counts, which its
// instrumentation changes, are not asserted.
const raceEnabled = true
