package crashtest_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// As TestKeyIgnoringSaveKilled, but the journaling of the endpoint
// learnt from ignoringLearnt's 201 outlasts the drive's 10 s wait for it
// (the Store's commit stalls: a bbolt fsync held by a slow disk under the
// applier's lock, which heeds no context, modelled), and the process is
// SIGKILLed once the 201's outcome is committed. The outcome, unflagged,
// was committed with the endpoint unsaved: the next process read nothing
// of it, and Resume resent ignoringLost, sent once and its answer lost,
// under the same key to an endpoint that charges every request, a second
// charge. The endpoint's other open operations that may have executed
// are flagged before the outcome's commit. Default settings: the real
// 10 s bound, no result endpoint.
func TestKeyIgnoringSaveOutlivesItsBound(t *testing.T) {
	requireLostFlaggedAfterKill(t, "ignoring-save-outlived")
}

// stalledSaveStore dies once ignoringLearnt's outcome is committed
// (saveKilledStore); its journaling of an endpoint never commits,
// whatever its context says.
type stalledSaveStore struct {
	saveKilledStore
}

func (s *stalledSaveStore) AddKeyIgnoring(context.Context, string) error {
	select {} // the commit never returns; the kill ends the process
}

// ignoringSaveOutlived is the child of TestKeyIgnoringSaveOutlivesItsBound
// that dies.
func (ch *childProc) ignoringSaveOutlived() error {
	return ch.learntWhileLost(context.Background(), func(js *journal.Store) idem.Store {
		return &stalledSaveStore{saveKilledStore{Store: js}}
	})
}
