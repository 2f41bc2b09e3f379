package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// keyIgnoringSaveAfterFlag is a journal whose endpoint writes
// (AddKeyIgnoring), once armed (replica a's flag committed), are made by
// a database that is slow or stalled: each cancels the caller's context
// first if cancel is set (its deadline passing meanwhile); the first
// takes latency if set (a failover, modelled); each waits for release if
// set (a database that stopped answering, modelled); and each fails if
// its own context ended, as a database client fails a query whose
// context ended (pgx does).
type keyIgnoringSaveAfterFlag struct {
	*journal.Store
	cancel  context.CancelFunc
	latency time.Duration
	release chan struct{}
	armed   atomic.Bool
	slowed  atomic.Bool
}

func (s *keyIgnoringSaveAfterFlag) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	if !s.armed.Load() {
		return s.Store.AddKeyIgnoring(ctx, endpoint)
	}
	if s.cancel != nil {
		s.cancel()
	}
	var slow <-chan time.Time
	if s.latency > 0 && !s.slowed.Swap(true) {
		t := time.NewTimer(s.latency)
		defer t.Stop()
		slow = t.C
	}
	if slow != nil || s.release != nil {
		select {
		case <-slow:
		case <-s.release:
		case <-ctx.Done():
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

// replicaB is replica b of two on one journal (modelled by writing
// replica a's flag into b's bbolt journal) and a Solidgate payment
// endpoint that ignores the key ("A value of ignored means the endpoint
// does not", https://api-docs.solidgate.com/api/v2/idempotent-requests),
// no result endpoint given. The journal holds l, whose answer there was
// lost; while b's first send is out, replica a's walk of the endpoint's
// open operations (flagSentTo) flags x ReviewKeyIgnored, a is killed
// before its save of the endpoint commits, and b's saves of it are
// save's.
type replicaB struct {
	s      *keyIgnoringCharges
	save   *keyIgnoringSaveAfterFlag
	b      *idem.Client
	js     *journal.Store
	path   string
	charge string
	flags  atomic.Int32
}

// startReplicaB starts replica b (Resume: nothing open, no endpoint
// known) on a new journal wrapped by save, the endpoint answering b's
// sends with answer. aSent: replica a sent x before, its answer lost,
// and gave x up (its lease gone).
func startReplicaB(t *testing.T, save *keyIgnoringSaveAfterFlag, answer func(n int, w http.ResponseWriter), aSent bool, opts ...idem.Option) *replicaB {
	t.Helper()
	r := &replicaB{save: save}
	r.s = newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 1 && flagAsReplicaA(t, save.Store, "x") {
			r.flags.Add(1)
			save.armed.Store(true)
		}
		answer(n, w)
	})
	r.charge = r.s.srv.URL + "/api/v1/charge"
	r.path = filepath.Join(t.TempDir(), "idem.journal")
	var err error
	r.js, err = journal.Open(r.path)
	require.NoError(t, err)
	save.Store = r.js
	r.b, err = idem.New(save, append([]idem.Option{idem.WithHTTPClient(r.s.srv.Client())}, opts...)...)
	require.NoError(t, err)
	_, err = r.b.Resume(t.Context())
	require.NoError(t, err)
	if aSent {
		journalSentOnce(t, r.js, "x", "", r.charge, "")
	}
	journalSentOnce(t, r.js, "l", "", r.charge, "")
	return r
}

// submitX is b's caller's Submit of x, new, under ctx.
func (r *replicaB) submitX(ctx context.Context) (*idem.Result, error) {
	return r.b.Submit(ctx, idem.Request{Key: "x", URL: r.charge, Body: []byte(`{"amount":5,"order_id":"x"}`)})
}

// requireXPaid requires a's flag committed while b's send was out, the
// endpoint charged once by b (x), and x settled succeeded by its 201
// (pay_1), flagged review, sends attempts in all. Then it starts the
// next process on the journal, which must know the endpoint and charge l
// no second time (closeAndResumeKnowingTheEndpoint).
func (r *replicaB) requireXPaid(t *testing.T, res *idem.Result, err error, review string, sends int) {
	t.Helper()
	require.Equal(t, int32(1), r.flags.Load(), "a's flag committed while b's send was out")
	require.NoError(t, err, "x's 201, journaled")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, []string{"x"}, r.s.charged(), "b's sends: x's one")
	x, err := r.b.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, x.State, "x settled by its 201")
	require.Equal(t, review, x.Review, "x's review")
	require.Equal(t, sends, x.Attempts, "x's sends")
	require.NotNil(t, x.Result)
	require.Equal(t, "pay_1", x.Result.ResourceID, "b's payment, from its answer")
	r.s.mu.Lock()
	r.s.keys = nil // x's one charge here, counted above
	r.s.mu.Unlock()
	closeAndResumeKnowingTheEndpoint(t, r.s, r.b, r.js, r.path)
}

// b's caller submits x; the endpoint answers 201: x is paid, once, and b
// holds that answer. Its settling write, over a flag b did not read,
// writes nothing until b has journaled the endpoint (keepUnreadFlag);
// that journaling ran within the caller's context, and a caller whose
// deadline passed there (a slow endpoint write, or a wait for another
// save) was told only that its context ended, x left unknown and flagged
// with its 201 unjournaled: a person's time for an order known paid. The
// answer is now journaled whatever the caller does, as the outcome's
// commit is.
func TestKeyIgnoredFlagSetWhileTheSendRanSettlesTheAnswerAfterTheCallerGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(n int, w http.ResponseWriter)
	}{
		// b learns the endpoint from the answer and journals it; the
		// endpoint is journaled again for the flag, and the caller's
		// deadline passes in that write.
		{"answer marked ignored", ignoredCreated},
		// The header stripped by a gateway in front of the endpoint
		// (modelled): b learns the endpoint from the flag alone, and the
		// caller's deadline passes while its save is under way.
		{"answer unmarked", unmarkedCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := startReplicaB(t, &keyIgnoringSaveAfterFlag{cancel: cancel}, tc.answer, false)
			res, err := r.submitX(ctx)
			require.Error(t, ctx.Err(), "the caller gave up while the endpoint was journaled")
			r.requireXPaid(t, res, err, "", 1)
		})
	}
}

// unmarkedCreated is ignoredCreated without its Idempotency-Status.
func unmarkedCreated(n int, w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled"}`, n)
}

// As above, x sent before by replica a, its answer lost (the journal
// holds a's attempt), and then by b, a's lease gone: b's resend of x was
// judged before a learnt the endpoint ignores the key, and the flag
// comes while it is out. Two copies may have charged, the 201 tells of
// b's: settled succeeded, flagged ReviewMaybeTwice, as the query's answer
// after two sends is (TestResultQueryOfAKeyIgnoredFlagSetWhileItRanJournalsTheEndpoint),
// never cleared as after one send, the caller gone or not.
func TestKeyIgnoredFlagSetWhileAResendRanSettlesTheAnswerMaybeTwice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(n int, w http.ResponseWriter)
		gaveUp bool
	}{
		{"answer marked ignored, caller gave up", ignoredCreated, true},
		{"answer unmarked, caller gave up", unmarkedCreated, true},
		{"answer unmarked, caller waited", unmarkedCreated, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			save := &keyIgnoringSaveAfterFlag{}
			if tc.gaveUp {
				save.cancel = cancel
			}
			r := startReplicaB(t, save, tc.answer, true)
			res, err := r.b.Do(ctx, &idem.Operation{Key: "x"})
			require.Equal(t, tc.gaveUp, ctx.Err() != nil, "the caller gave up while the endpoint was journaled")
			r.requireXPaid(t, res, err, idem.ReviewMaybeTwice, 2)
		})
	}
}

// As TestKeyIgnoredFlagSetWhileTheSendRanSettlesTheAnswerAfterTheCallerGivesUp,
// the caller waiting (no deadline of its own), the client's attempt
// timeout 1 s (a bound on one exchange with the endpoint), and the
// journal's save of the endpoint, made for the flag, taking 2 s. The
// answer's commit must outlast a caller that gave up by up to the
// attempt timeout; it must not be cut short by it for a caller that still
// waits: its 201 unjournaled, x left unknown and flagged for a person,
// an order known paid (no result endpoint settles it).
func TestKeyIgnoredFlagSetWhileTheSendRanSettlesTheAnswerWhileTheCallerWaitsOnASlowJournal(t *testing.T) {
	const attemptTimeout = time.Second
	r := startReplicaB(t, &keyIgnoringSaveAfterFlag{latency: 2 * attemptTimeout}, unmarkedCreated, false, idem.WithAttemptTimeout(attemptTimeout))
	res, err := r.submitX(t.Context())
	r.requireXPaid(t, res, err, "", 1)
}

// As TestKeyIgnoredFlagSetWhileTheSendRanSettlesTheAnswerAfterTheCallerGivesUp,
// the journal's save of the endpoint for the flag stalled: a caller that
// gave up waits the attempt timeout after that at most (not the 10 s the
// save itself is given), and x is handed off open and flagged, never
// resent, nor l.
func TestKeyIgnoredFlagSetWhileTheSendRanHoldsACallerThatGaveUpTheAttemptTimeoutAtMost(t *testing.T) {
	const attemptTimeout = time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	save := &keyIgnoringSaveAfterFlag{cancel: cancel, release: make(chan struct{})}
	r := startReplicaB(t, save, unmarkedCreated, false, idem.WithAttemptTimeout(attemptTimeout))
	start := time.Now()
	_, err := r.submitX(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Error(t, ctx.Err(), "the caller gave up while the endpoint was journaled")
	require.GreaterOrEqual(t, took, attemptTimeout, "the answer's commit outlasts the caller")
	require.Less(t, took, 5*attemptTimeout, "and holds it the attempt timeout at most")
	require.Equal(t, []string{"x"}, r.s.charged(), "sends: x's one")
	x, err := r.b.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, x.State, "x handed off")
	require.Equal(t, idem.ReviewKeyIgnored, x.Review, "x: still flagged, its 201 unjournaled")
	close(save.release) // the database answers again
	r.s.mu.Lock()
	r.s.keys = nil // x's one charge, counted above
	r.s.mu.Unlock()
	require.NoError(t, r.b.Close())
	require.NoError(t, r.js.Close())
	resumeWithoutResendingL(t, r.s, r.path)
}
