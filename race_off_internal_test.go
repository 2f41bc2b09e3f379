//go:build !race

package idem

// raceEnabled: the race detector is off, and allocation counts are
// asserted (race_on_internal_test.go says why they are not under it).
const raceEnabled = false
