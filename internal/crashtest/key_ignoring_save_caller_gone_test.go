package crashtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// As TestKeyIgnoringSaveKilled, but the caller of ignoringLearnt's
// Submit gives up (its context cancelled: a request deadline, a client
// that hung up) while the endpoint learnt from its 201 is being
// journaled, and the process is SIGKILLed once the 201's outcome is
// committed. The save's fsync'd commit is slower than the outcome's
// (modelled: the file's commit waits for the applier, the outcome only
// for the log's append). The drive's wait for the save ended with the
// caller's context, and the outcome, unflagged, was committed before the
// endpoint: the next process read nothing of it, and Resume resent
// ignoringLost under the same key to an endpoint that charges every
// request, a second charge.
func TestKeyIgnoringSaveOutlivesTheCaller(t *testing.T) {
	requireLostFlaggedAfterKill(t, "ignoring-save-caller-gone")
}

// slowSaveStore dies once ignoringLearnt's outcome is committed
// (saveKilledStore); its journaling of an endpoint tells started when it
// begins, and commits only once done is closed (a slow commit,
// modelled): a child whose outcome does not wait for it dies first.
type slowSaveStore struct {
	saveKilledStore
	once    sync.Once
	started chan struct{}
	done    chan struct{}
}

func (s *slowSaveStore) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	s.once.Do(func() { close(s.started) })
	select {
	case <-s.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

// ignoringSaveCallerGone is the child of TestKeyIgnoringSaveOutlivesTheCaller
// that dies.
func (ch *childProc) ignoringSaveCallerGone() error {
	ctx, cancel := context.WithCancel(context.Background())
	return ch.learntWhileLost(ctx, func(js *journal.Store) idem.Store {
		store := &slowSaveStore{saveKilledStore: saveKilledStore{Store: js}, started: make(chan struct{}), done: make(chan struct{})}
		go func() {
			<-store.started
			cancel() // the caller gives up while the endpoint is being journaled
			// The modelled commit's length: the outcome's commit, if it
			// does not wait, kills the child well before.
			time.AfterFunc(2*time.Second, func() { close(store.done) })
		}()
		return store
	})
}
