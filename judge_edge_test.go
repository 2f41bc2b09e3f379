package idem_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Edge cases of how answers and joiners are judged, each one a history in
// which the client would report an outcome that is not the call's own.

// A Submit joined to a leader with the same key but another body must
// never be told the leader's outcome: its own request was never journaled
// nor sent. When its context ends while it waits, it is.
func TestJoinerWithAnotherBodyWhoseContextEndedIsNotToldTheLeadersSuccess(t *testing.T) {
	var e *env
	var joinRes *idem.Result
	var joinErr error
	joined := false
	e = newEnv(t, clientOpts(idem.WithHooks(idem.Hooks{Settle: func(context.Context, *idem.Result) {
		if joined {
			return
		}
		joined = true
		// The leader has settled but is still in flight (its Settle hook
		// runs inside the call): a caller whose deadline ends now joins it.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		joinRes, joinErr = e.client.Submit(ctx, e.req("k-join", `{"amount":999}`))
	}})))

	res, err := e.client.Submit(e.ctx, e.req("k-join", `{"amount":100}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.True(t, joined)
	require.Len(t, e.submits("k-join"), 1, "only the leader's body went out")

	// The joiner's {"amount":999} was never sent: "succeeded" is the
	// leader's order, not its own.
	require.Error(t, joinErr, "joiner with another body was told succeeded (result %+v)", joinRes)
	require.ErrorIs(t, joinErr, idem.ErrKeyConflict)
}

// gatedStore holds the first Create until released, so a test can act
// while a Submit is between joining the key and journaling it.
type gatedStore struct {
	idem.Store
	entered chan struct{}
	release chan struct{}
	once    bool
}

func (s *gatedStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	if !s.once {
		s.once = true
		close(s.entered)
		<-s.release
	}
	return s.Store.Create(ctx, rec)
}

// Promise 13: an error that does not match ErrUnknownOutcome means nothing
// was journaled and nothing will be sent for that call. A joiner whose
// context ends before its leader has journaled the (identical) request is
// told "not found", while the leader journals and sends it.
func TestJoinerWhoseContextEndsBeforeTheLeaderJournalsIsToldUnknown(t *testing.T) {
	e := newEnv(t)
	gs := &gatedStore{Store: e.store, entered: make(chan struct{}), release: make(chan struct{})}
	c, err := idem.New(gs, e.baseOpts()...)
	require.NoError(t, err)

	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Submit(e.ctx, e.req("k-early", `{"amount":100}`))
		leaderErr <- err
	}()
	select {
	case <-gs.entered:
	case <-time.After(time.Minute):
		t.Fatal("leader never reached the journal")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, joinErr := c.Submit(ctx, e.req("k-early", `{"amount":100}`))

	close(gs.release)
	select {
	case err := <-leaderErr:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("leader did not finish")
	}
	require.Len(t, e.submits("k-early"), 1, "the joiner's very request was sent by its leader")

	require.Error(t, joinErr)
	require.ErrorIs(t, joinErr, idem.ErrUnknownOutcome,
		"the call's request was journaled and sent, but its error says nothing was: %v", joinErr)
}

// replayedSuccess is a stored 2xx the server replays for the key.
func replayedSuccess(id string) step {
	return step{status: http.StatusOK, header: http.Header{"Idempotent-Replayed": {"true"}},
		body: `{"state":"succeeded","resourceId":"` + id + `"}`}
}

// contestedHistory: throttled n times, then a 409 before anything of ours
// executed (another request holds the key), then gateway 500s, then the
// server replays a stored success, which may be the other request's order.
func contestedHistory(throttled, errs int) []step {
	var s []step
	for i := 0; i < throttled; i++ {
		s = append(s, step{status: http.StatusTooManyRequests})
	}
	s = append(s, step{status: http.StatusConflict})
	for i := 0; i < errs; i++ {
		s = append(s, step{status: http.StatusBadGateway})
	}
	return append(s, replayedSuccess("ord_theirs"))
}

func runContested(t *testing.T, throttled, errs int) (*env, *idem.Result, error) {
	e := newEnv(t, noResultEndpoint(), script(contestedHistory(throttled, errs)...), clientOpts(
		idem.WithMaxAttempts(200), idem.WithMaxElapsed(24*time.Hour), idem.WithRetryBudget(0, 0)))
	res, err := e.client.Submit(e.ctx, e.req("k-contested", `{"amount":100}`))
	return e, res, err
}

// Control: with a short history the 409 is remembered and the replayed
// success is not taken as ours.
func TestContestedKeyReplayIsReviewedInAShortHistory(t *testing.T) {
	_, res, err := runContested(t, 2, 3)
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.ReviewKeyInUse, res.Review)
	require.NotEqual(t, idem.StateSucceeded, res.State)
}

// Compaction drops the 409 that made the key contested (it is neither
// among the first entries, nor maybe executed, nor replayed): the other
// request's stored success is then settled as ours.
func TestContestedKeySurvivesAttemptCompaction(t *testing.T) {
	e, res, err := runContested(t, 16, 48)
	rec := e.record("k-contested")
	require.Greater(t, len(rec.Attempts), 0)
	require.Equal(t, 66, rec.Attempts[len(rec.Attempts)-1].Number, "history long enough to be compacted")
	require.NotEqual(t, idem.StateSucceeded, res.State,
		"another request's replayed order settled as ours (resource %q)", res.ResourceID)
	require.ErrorIs(t, err, idem.ErrKeyConflict)
}

// A replay over the response cap is cut the same way every time: resending
// the key replays it again. Unlike a body cut in transit, it is final.
// Without a result endpoint the client resends it until its budget (and
// then every reconciler visit, until the deadline).
func TestReplayOverTheResponseCapIsNotResentForEver(t *testing.T) {
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxResponseBytes(8), idem.WithMaxAttempts(10),
		idem.WithMaxElapsed(time.Hour), idem.WithRetryBudget(0, 0)))
	res, err := e.client.Submit(e.ctx, e.req("k-big", `{"amount":100}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, 1, e.srv.Effects(scope, "k-big"))
	// The first answer (not a replay) is undecodable: one resend to read
	// the stored answer is fair. Its replay is the final word.
	require.LessOrEqual(t, len(e.submits("k-big")), 2,
		"replayed over-cap answer resent %d times; review %q", len(e.submits("k-big")), res.Review)
}

// The Processing verdict means "the server holds the key in flight"
// (Verdict's documentation): a classifier that gives it to 202 Accepted,
// the status of an API that runs the order asynchronously, is what it is
// for. Yet a Processing answer to the first attempt is judged "someone
// else's request holds the key": the attempt is journaled as refused, so
// the order the server accepted for us is never queried, and its stored
// answer, once replayed, is taken for another request's.
func TestProcessingVerdictOnTheFirstAttemptIsOurs(t *testing.T) {
	accepted := func(status int) idem.Verdict {
		if status == http.StatusAccepted {
			return idem.Processing
		}
		return idem.DefaultClassifier(status)
	}
	e := newEnv(t, clientOpts(idem.WithClassifier(accepted), idem.WithMaxAttempts(10), idem.WithRetryBudget(0, 0)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Delay: 5 * time.Second}))

	res, err := e.client.Submit(e.ctx, e.req("k-202", `{"amount":100}`))
	require.Equal(t, 1, e.srv.Effects(scope, "k-202"))
	require.NoError(t, err, "review %q", res.Review)
	require.Equal(t, idem.StateSucceeded, res.State)
}
