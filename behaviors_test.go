package idem_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// maxSubmitsAfterFinal bounds the submits the server may see for one key
// once its answer for the key can no longer change: a lost response is
// resent once; a stored answer resent in a loop is a bug.
const maxSubmitsAfterFinal = 3

// outcome is what one operation must come to.
type outcome struct {
	state   idem.State // terminal, or StateUnknown for "open, flagged for review"
	err     error      // the error Submit returns must match it; nil for none
	effects int        // side effects of our own on the server
}

var (
	succeeded   = outcome{state: idem.StateSucceeded, effects: 1}
	declined    = outcome{state: idem.StateFailed, err: idem.ErrFailed}
	keyConflict = outcome{state: idem.StateFailed, err: idem.ErrKeyConflict}
	// Flagged for review: the server's stored answer cannot change and
	// does not say what happened.
	reviewNone = outcome{state: idem.StateUnknown, err: idem.ErrUnknownOutcome}
	reviewDone = outcome{state: idem.StateUnknown, err: idem.ErrUnknownOutcome, effects: 1}
	// Someone else's answer replayed to us: never succeeded.
	reviewConflict = outcome{state: idem.StateUnknown, err: idem.ErrKeyConflict}
)

// TestOutcomeTableUnderBehaviors drives one operation through the rows of
// the outcome table (DESIGN.md) that a server's behaviour can change,
// under every behaviour of the fake server, and checks the outcome the
// table promises, the side effects, and that the key is not resent once
// the server's answer is final.
func TestOutcomeTableUnderBehaviors(t *testing.T) {
	const key = "order-1"
	tests := []struct {
		name string
		// setup scripts the server (faults, someone else's request)
		// before the Submit.
		setup    func(t *testing.T, srv *idemtest.Server)
		noResult bool   // the API has no result endpoint: reconcile by replay
		steps    []step // a script of answers in front of the server
		opts     []idem.Option
		want     outcome
		// per overrides want under the behaviours named.
		per map[string]outcome
	}{
		{name: "2xx decodes", want: succeeded},
		{name: "garbage body", setup: inject(idemtest.Fault{Kind: idemtest.GarbageBody}), want: succeeded},
		{name: "truncated body", setup: inject(idemtest.Fault{Kind: idemtest.TruncatedBody}), want: succeeded},
		{name: "connection dropped after commit", setup: inject(idemtest.Fault{Kind: idemtest.DropAfterCommit}), want: succeeded},
		{name: "timeout after commit", setup: inject(idemtest.Fault{Kind: idemtest.DelayResponse, Delay: time.Minute}),
			opts: []idem.Option{idem.WithAttemptTimeout(100 * time.Millisecond)}, want: succeeded},
		{name: "slow processing", setup: inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Delay: 5 * time.Second}), want: succeeded},
		// Without a result endpoint the resend is the only question: the
		// server holds the key, and answers it (409, or its stored result).
		{name: "slow processing, no result endpoint", setup: inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Delay: 5 * time.Second}),
			noResult: true, want: succeeded},
		{name: "429", setup: inject(idemtest.Fault{Kind: idemtest.Throttle}), want: succeeded},
		{name: "402 declined", setup: inject(idemtest.Fault{Kind: idemtest.Decline}), want: declined},
		{name: "the handler's 409", setup: inject(idemtest.Fault{Kind: idemtest.Reject409}), want: declined},
		{name: "the handler's 409, no result endpoint", setup: inject(idemtest.Fault{Kind: idemtest.Reject409}),
			noResult: true, want: declined},
		// Stored errors: a replayed 5xx is the key's final answer.
		{name: "500 after commit", setup: inject(idemtest.Fault{Kind: idemtest.ErrorAfterCommit}), want: succeeded},
		{name: "500 after commit, no result endpoint", setup: inject(idemtest.Fault{Kind: idemtest.ErrorAfterCommit}),
			noResult: true, want: succeeded, per: map[string]outcome{"stored-errors": reviewDone}},
		{name: "500 before commit", setup: inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit}),
			want: succeeded, per: map[string]outcome{"stored-errors": reviewNone}},
		{name: "503", setup: inject(idemtest.Fault{Kind: idemtest.Unavailable}),
			want: succeeded, per: map[string]outcome{"stored-errors": reviewNone}},
		// Someone else used the key first, and is still at it: 409, then
		// the answer to a used key with another body.
		{name: "someone else in flight: 409, then the conflict", setup: preempt(key, 5*time.Second),
			want: keyConflict, per: map[string]outcome{"no-body-compare": reviewConflict, "conflict-417": declined}},
		{name: "someone else in flight, no result endpoint", setup: preempt(key, 5*time.Second), noResult: true,
			want: keyConflict, per: map[string]outcome{"no-body-compare": reviewConflict, "conflict-417": declined}},
		// The first answer, 409 to an operation nothing of which was sent
		// before, says someone else holds the key: while they do, no
		// request of ours with it can execute, but a gateway's 502 on the
		// way may hide one that did (the other request may have ended in
		// between). The result endpoint reports the key's request: its
		// success may be theirs, so it is flagged, never taken as ours.
		{name: "someone else in flight, then a gateway 502", setup: preempt(key, 5*time.Second),
			steps: []step{{forward: true}, {status: http.StatusBadGateway}},
			want:  reviewConflict},
		// Someone else used the key and was answered: on our first attempt,
		// the conflict, or a silent replay of their 201.
		{name: "someone else done: conflict or silent replay", setup: preempt(key, 0),
			want: keyConflict, per: map[string]outcome{"no-body-compare": reviewConflict, "conflict-417": declined}},
	}
	for _, b := range headerKeyBehaviors() {
		for _, tt := range tests {
			t.Run(b.Name+"/"+tt.name, func(t *testing.T) {
				want := tt.want
				if w, ok := tt.per[b.Name]; ok {
					want = w
				}
				opts := []envOption{serverOpts(idemtest.WithBehavior(b)), clientOpts(tt.opts...)}
				if tt.noResult {
					opts = append(opts, noResultEndpoint())
				}
				if tt.steps != nil {
					opts = append(opts, script(tt.steps...))
				}
				e := newEnv(t, opts...)
				if tt.setup != nil {
					tt.setup(t, e.srv)
				}
				res, err := e.client.Submit(e.ctx, e.req(key, `{"amount":100}`))
				require.NotNil(t, res, "Submit() result; error %v", err)
				e.requireOutcome(key, res, err, want)
			})
		}
	}
}

// TestKeyWindowUnderBehaviors: a process gives up on an operation whose
// response was lost, and restarts an hour later. A server that keeps keys
// a day replays or reports the result; one that forgot the key after 30
// minutes would run the resent request again, so the client must not
// resend past a window that short by default: it flags the operation for
// review instead.
func TestKeyWindowUnderBehaviors(t *testing.T) {
	const key = "order-1"
	for _, b := range headerKeyBehaviors() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, serverOpts(idemtest.WithBehavior(b)))
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: key}))
			first, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithMaxAttempts(1))...)
			require.NoError(t, err)
			res, err := first.Submit(e.ctx, e.req(key, `{"amount":100}`))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, idem.StateUnknown, res.State, "handed off after one attempt")
			require.NoError(t, first.Close())

			e.clock.Advance(time.Hour)
			e.restart()
			_, err = e.client.Resume(e.ctx)
			require.NoError(t, err)
			rec := e.record(key)
			ks := e.srv.KeyStats(scope, key)
			t.Logf("after Resume: %s %q; server %+v", rec.State, rec.Review, ks)
			require.Equal(t, 1, ks.Effects, "side effects: resent after the server forgot the key")
			if b.Retention == 0 {
				require.Equal(t, idem.StateSucceeded, rec.State, "state")
				return
			}
			require.Equal(t, idem.StateUnknown, rec.State, "state past the window")
			require.NotEmpty(t, rec.Review, "review reason past the window")
		})
	}
}

// headerKeyBehaviors returns the presets whose key is a header: an order
// API's (client-order-id) reads it from the body, which these requests do
// not hold; the fault matrix and the crash harness run that one, with the
// client configured for it.
func headerKeyBehaviors() []idemtest.Behavior {
	var bs []idemtest.Behavior
	for _, b := range idemtest.Behaviors() {
		if b.KeyMember == "" {
			bs = append(bs, b)
		}
	}
	return bs
}

func inject(f idemtest.Fault) func(*testing.T, *idemtest.Server) {
	return func(t *testing.T, srv *idemtest.Server) {
		t.Helper()
		f.Key = "order-1"
		require.NoError(t, srv.Inject(f))
	}
}

// preempt makes someone else, in our scope, use key first, processing for
// hold.
func preempt(key string, hold time.Duration) func(*testing.T, *idemtest.Server) {
	return func(t *testing.T, srv *idemtest.Server) {
		t.Helper()
		require.NoError(t, srv.Preempt(scope, key, hold))
	}
}

// requireOutcome checks one operation against want: Submit's state and
// error, the journal, the server's side effects, the submits after the
// server's answer was final, and, once terminal, that asking again sends
// nothing.
func (e *env) requireOutcome(key string, res *idem.Result, err error, want outcome) {
	t := e.t
	t.Helper()
	rec := e.record(key)
	ks := e.srv.KeyStats(scope, key)
	t.Logf("Submit() = %s, %v; journal %s %q; server %+v; %d submits, %d queries",
		res.State, err, rec.State, rec.Review, ks, len(e.submits(key)), e.queries(key))
	if want.err == nil {
		require.NoError(t, err, "Submit() error")
	} else {
		require.ErrorIs(t, err, want.err, "Submit() error")
	}
	require.Equal(t, want.state, res.State, "Submit() state")
	require.Equal(t, want.state, rec.State, "journaled state")
	if !want.state.Terminal() {
		require.NotEmpty(t, rec.Review, "review reason of an operation left open")
	}
	require.Equal(t, want.effects, ks.Effects, "side effects of our own")
	require.LessOrEqual(t, ks.SubmitsAfterFinal, maxSubmitsAfterFinal, "submits after the server's answer was final")
	e.requireSameBytes(key)
	if want.state == idem.StateSucceeded {
		require.NotEmpty(t, res.ResourceID)
	}
	if !want.state.Terminal() {
		return
	}
	// Terminal is final: asking again sends nothing.
	before := len(e.srv.Requests())
	op, err := e.client.Lookup(e.ctx, idem.DefaultScope, key)
	require.NoError(t, err)
	again, err := e.client.Do(e.ctx, op)
	require.Equal(t, res.State, again.State)
	if want.err != nil && !errors.Is(err, want.err) {
		t.Errorf("Do() of a settled operation: error %v; want %v", err, want.err)
	}
	require.Len(t, e.srv.Requests(), before, "requests after settling")
}
