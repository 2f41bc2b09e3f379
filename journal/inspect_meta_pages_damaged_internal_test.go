package journal

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withInspectStep sets inspectStep: it runs inside Inspect between its
// Open and its walk of the file.
func withInspectStep(step func()) Option {
	return optionFunc(func(c *config) { c.inspectStep = step })
}

// TestInspectMetaPagesDamagedAfterOpenReturns: both meta pages damaged
// after Inspect's Open validated them (a disk fault, a stray write while
// idem check runs): bbolt's Begin of the walk's read panics "invalid meta
// pages" holding its meta and mmap locks. Inspect got the heldLocks error
// but never stopped the Store's use of bbolt (stopUsing), so its deferred
// Close called bbolt's Close, which waits for those locks for ever: idem
// check hung where it must report the damage.
func TestInspectMetaPagesDamagedAfterOpenReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Create(context.Background(), newRecord("a"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	within(t, "Inspect", func() {
		_, err := Inspect(path, withInspectStep(func() {
			damageMetaPage(t, path, 0)
			damageMetaPage(t, path, 1)
		}))
		assert.ErrorIs(t, err, ErrCorrupt)
	})
	// The file's lock is released: the next Open reads the file and
	// calls it damaged, rather than waiting for this process.
	within(t, "Open again", func() {
		_, err := Open(path, ReadOnly())
		assert.ErrorIs(t, err, ErrCorrupt)
		assert.NotErrorIs(t, err, ErrLocked)
	})
}
