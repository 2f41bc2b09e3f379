//go:build !race

package journal

// raceEnabled: the race detector is on, and allocation counts, which its
// instrumentation changes, are not asserted.
const raceEnabled = false
