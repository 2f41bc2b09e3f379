package idem_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// CallEvent.URL is documented as credential-free, and a service's Call
// hook logs it; an operation journaled by a release that still accepted
// a credential in its URL (apilayer's ?access_key=, refused since
// 85d034e, and finished after the upgrade rather than stranded) handed
// its key to the hook on every visit, where the admin handler and the
// idem command show the same URL redacted.
func TestCallEventOfALegacyRecordHoldsNoCredential(t *testing.T) {
	var (
		mu     sync.Mutex
		events []idem.CallEvent
	)
	e := newEnv(t, clientOpts(idem.WithHooks(idem.Hooks{Call: func(ctx context.Context, ev idem.CallEvent) (context.Context, func(*idem.Result, error)) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
		return ctx, nil
	}})))
	journalLegacy(t, e, "?currency=EUR&access_key=LEGACY", nil)
	e.crashMidAttempt("k")
	e.restart()
	finishJournaledOnce(t, e, "resume", idem.Request{})

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, events, "the Resume visit's call")
	for _, ev := range events {
		require.Equal(t, e.srv.URL+"/orders?currency=EUR&access_key=REDACTED", ev.URL, "%s call", ev.Kind)
		require.NotContains(t, ev.ResultURL, "LEGACY", "%s call", ev.Kind)
	}
}
