package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestHookInvalidHeaderIsNeverSent: a request hook that sets a header
// net/http refuses (a token read from a file with its trailing newline)
// fails every attempt before anything is written, and before any trace
// event, which read as "maybe sent": the operation was queried, judged
// maybe executed, and left for review past its key window though the
// server never saw it. It is now "not sent", its error names the header
// and never its value, and once the hook is fixed it settles with one
// side effect.
func TestHookInvalidHeaderIsNeverSent(t *testing.T) {
	const secret = "sk_live_NEWLINE_PLANTED"
	broken := idem.WithRequestHook(func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+secret+"\n")
		return nil
	})
	e := newEnv(t, clientOpts(broken))
	_, err := e.client.Submit(e.ctx, e.req("hook-nl", `{"amount":5}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	rec := e.record("hook-nl")
	require.Equal(t, idem.StatePending, rec.State, "State after attempts that were never sent")
	require.NotEmpty(t, rec.Attempts)
	for _, a := range rec.Attempts {
		require.Equal(t, journal.AttemptSubmit, a.Kind, "attempt %d: no query for what was never sent", a.Number)
		require.False(t, a.Wrote, "attempt %d Wrote", a.Number)
		require.Contains(t, a.Err, "Authorization")
		require.NotContains(t, a.Err, secret)
	}
	require.NotContains(t, err.Error(), secret)
	require.Zero(t, len(e.srv.Requests()), "server requests")

	e.opts = nil // the env's own hook: a valid credential
	e.restart()
	_, err = e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, e.record("hook-nl").State)
	require.Equal(t, 1, e.srv.Effects(scope, "hook-nl"))
}
