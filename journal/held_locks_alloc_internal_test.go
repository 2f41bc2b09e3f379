package journal

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLocksHeldOfNoErrorAllocatesNothing: stopUsing asks locksHeld of every
// read's and write's error, nil on the happy path, and errors.As
// allocates its target: one allocation per operation for nothing.
func TestLocksHeldOfNoErrorAllocatesNothing(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if locksHeld(nil) {
			t.Fatal("no error holds no locks")
		}
	}))
	assert.True(t, locksHeld(errors.Join(errors.New("x"), &heldLocks{ErrCorrupt})))
	assert.False(t, locksHeld(ErrCorrupt))
}
