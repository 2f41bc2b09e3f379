package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// lateSends counts the submits a transport starts once confirmed is set.
// sent hears of every submit, for a confirmation that waits for one.
type lateSends struct {
	base      http.RoundTripper
	confirmed atomic.Bool
	late      atomic.Int32
	sent      chan struct{}
	answered  chan struct{}
}

// notify tells ch's reader, if it listens.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// drain forgets a signal the previous round left.
func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

func (l *lateSends) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		if l.confirmed.Load() {
			l.late.Add(1)
		}
		notify(l.sent)
		defer notify(l.answered)
	}
	return l.base.RoundTrip(r)
}

// TestConfirmRacesResend races a webhook's confirmation against a Do that
// resends the operation (its first response was lost): whichever commits
// first, the server performs it once, the operation ends in one state,
// the settle hook fires once, and no submit starts after the confirmation
// returned except one journaled before it.
func TestConfirmRacesResend(t *testing.T) {
	const maxRounds = 300
	deadline := time.Now().Add(3 * time.Second)
	counts := newSettleCounts()
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)), counts.options())
	tr := &lateSends{base: e.srv.Client().Transport, sent: make(chan struct{}, 1), answered: make(chan struct{}, 1)}
	// A fresh connection per request: net/http silently resends a request
	// whose reused connection died, and that resend would settle it.
	submitter, err := idem.New(e.replica(), append(e.baseOpts(),
		idem.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = submitter.Close() })
	resender, err := idem.New(e.replica(), append(e.baseOpts(),
		idem.WithMaxAttempts(idem.DefaultMaxAttempts), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resender.Close() })

	won := map[journal.ConfirmEffect]int{}
	rounds, lateAnswers := 0, 0
	for ; rounds < maxRounds && time.Now().Before(deadline); rounds++ {
		key := fmt.Sprintf("k%d", rounds)
		id := fmt.Sprintf("ord_%06d", rounds+1)
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: key}))
		_, err := submitter.Submit(e.ctx, e.req(key, `{"n":1}`))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, "round %d: the lost response", rounds)
		// The event arrives with the resend, throttled first so that it
		// must come back for another attempt; or once the resend is on
		// its way; or once its answer is back, racing its commit.
		var waitFor chan struct{}
		switch rounds % 3 {
		case 1:
			waitFor = tr.sent
		case 2:
			waitFor = tr.answered
		}
		if waitFor == nil {
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Throttle, Key: key}))
		}
		op, err := resender.Lookup(e.ctx, "", key)
		require.NoError(t, err)
		tr.confirmed.Store(false)
		tr.late.Store(0)
		drain(tr.sent)
		drain(tr.answered)

		var wg sync.WaitGroup
		var doRes *idem.Result
		var doErr, confirmErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			doRes, doErr = resender.Do(e.ctx, op)
		}()
		go func() {
			defer wg.Done()
			<-start
			if waitFor != nil {
				select {
				case <-waitFor:
				case <-time.After(10 * time.Second):
					confirmErr = fmt.Errorf("no resend answered within 10s")
					return
				}
			}
			_, confirmErr = resender.Confirm(e.ctx, "", key, webhookEvent(idem.StateSucceeded, id, "evt_"+key))
			tr.confirmed.Store(true)
		}()
		close(start)
		wg.Wait()

		require.NoError(t, confirmErr, "round %d: Confirm()", rounds)
		if doErr == nil {
			require.Equal(t, id, doRes.ResourceID, "round %d: Do() result", rounds)
		} else {
			// Do handed off before the confirmation committed.
			require.ErrorIs(t, doErr, idem.ErrUnknownOutcome, "round %d: Do()", rounds)
		}
		rec := e.record(key)
		require.Equal(t, idem.StateSucceeded, rec.State, "round %d: final state", rounds)
		require.Equal(t, id, rec.Result.ResourceID, "round %d: final resource", rounds)
		require.Equal(t, 1, e.srv.Effects(scope, key), "round %d: side effects", rounds)
		journaled := 0
		for _, a := range rec.Attempts {
			if a.Kind == journal.AttemptSubmit {
				journaled++
			}
		}
		require.LessOrEqual(t, len(e.submits(key)), journaled, "round %d: every submit the server saw was journaled", rounds)
		require.LessOrEqual(t, tr.late.Load(), int32(1), "round %d: submits started after the confirmation returned", rounds)
		// The event, and perhaps the resend's answer after it, which
		// agrees.
		require.NotEmpty(t, rec.Confirmations)
		require.LessOrEqual(t, len(rec.Confirmations), 2)
		effect := rec.Confirmations[0].Effect
		if len(rec.Confirmations) == 2 {
			late := rec.Confirmations[1]
			require.Equal(t, idem.ResponseSource, late.Source, "round %d", rounds)
			require.Equal(t, journal.ConfirmAgreed, late.Effect, "round %d: the late answer", rounds)
			lateAnswers++
		}
		won[effect]++
		require.Equal(t, 1, counts.get(counts.hook, key), "round %d: settle hook calls", rounds)
		wantFn := 0
		if effect == journal.ConfirmSettled {
			wantFn = 1 // the settle func hears of what nobody waited for
		}
		require.Equal(t, wantFn, counts.get(counts.fn, key), "round %d: settle func calls", rounds)
	}
	require.GreaterOrEqual(t, rounds, 20, "races run before the deadline")
	t.Logf("%d races: the confirmation settled %d (the resend's answer came later in %d), agreed with the resend's settlement %d",
		rounds, won[journal.ConfirmSettled], lateAnswers, won[journal.ConfirmAgreed])
}

// confirmOnSend confirms the operation while its submit is on the wire,
// before the server answers: the answer then meets a settled operation.
type confirmOnSend struct {
	base    http.RoundTripper
	confirm func() error
	err     error
}

func (c *confirmOnSend) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && c.confirm != nil {
		c.err = c.confirm()
		c.confirm = nil
	}
	return c.base.RoundTrip(r)
}

// TestConfirmLateAnswer: a resend's answer that arrives after a
// confirmation or a manual resolution settled the operation is checked
// against it, not lost: if it agrees it is recorded, if it contradicts the
// settled outcome is kept, the operation flagged, and the call told so
// (ErrNeedsReview, not ErrFailed). The server replays
// its stored answer for the key, as Stripe does for a repeated
// Idempotency-Key: the order exists. An operator who resolved the
// operation as failed while the resend was on the wire (the provider's
// dashboard lagged, and showed nothing) saw that answer dropped without a
// trace: a customer charged, the journal saying failed, nobody told.
func TestConfirmLateAnswer(t *testing.T) {
	confirm := func(c idem.Confirmation) func(*idem.Client) (idem.State, error) {
		return func(cl *idem.Client) (idem.State, error) {
			_, err := cl.Confirm(context.Background(), "", "k", c)
			return c.State, err
		}
	}
	// Resolutions are forced: made on purpose while the resend is on the
	// wire, which Resolve refuses without Force.
	resolve := func(r idem.Resolution) func(*idem.Client) (idem.State, error) {
		return func(cl *idem.Client) (idem.State, error) {
			_, err := cl.Resolve(context.Background(), "", "k", r)
			return r.State, err
		}
	}
	tests := []struct {
		name     string
		settle   func(*idem.Client) (idem.State, error) // while the resend is on the wire
		events   int                                    // confirmations it records
		conflict bool
	}{
		{"confirmation agrees", confirm(webhookEvent(idem.StateSucceeded, "ord_000001", "evt_1")), 1, false},
		{"confirmation contradicts", confirm(webhookEvent(idem.StateFailed, "", "evt_1")), 1, true},
		{"resolution agrees", resolve(idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the dashboard", By: "ops", Force: true}), 0, false},
		{"resolution contradicts", resolve(idem.Resolution{State: idem.StateFailed, Reason: "not in the dashboard", By: "ops", Force: true}), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := newSettleCounts()
			e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)), counts.options())
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
			_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			// The setup's one attempt left it unknown, as a caller whose
			// deadline passed would; the resend is a Do with the default
			// budget.
			tr := &confirmOnSend{base: e.srv.Client().Transport}
			resender, err := idem.New(e.replica(), append(e.baseOpts(),
				idem.WithMaxAttempts(idem.DefaultMaxAttempts), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = resender.Close() })
			var settled idem.State
			tr.confirm = func() (err error) {
				settled, err = tt.settle(resender)
				return err
			}
			op, err := resender.Lookup(e.ctx, "", "k")
			require.NoError(t, err)
			res, err := resender.Do(e.ctx, op)
			require.NoError(t, tr.err, "settled during the resend")
			require.Len(t, e.submits("k"), 2, "the resend went out")
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")

			rec := e.record("k")
			require.Equal(t, settled, rec.State, "the settled state is kept")
			require.Len(t, rec.Confirmations, tt.events+1, "the event if any, then the server's answer")
			late := rec.Confirmations[tt.events]
			require.Equal(t, idem.ResponseSource, late.Source)
			require.Equal(t, idem.StateSucceeded, late.State, "the server's answer: its replay")
			require.Equal(t, "ord_000001", late.ResourceID)
			if tt.conflict {
				// A checkout told ErrFailed asks the customer to pay
				// again, under a new key: a second charge.
				requireContradicted(t, res, err, idem.ReviewConfirmConflict)
				require.Equal(t, http.StatusCreated, res.StatusCode, "the server's answer")
				var answer struct{ ResourceID string }
				require.NoError(t, json.Unmarshal(res.Body, &answer), "the answer's body: %q", res.Body)
				require.Equal(t, "ord_000001", answer.ResourceID)
				require.Equal(t, journal.ConfirmConflicted, late.Effect)
				require.Equal(t, idem.ReviewConfirmConflict, rec.Review)
				require.Equal(t, idem.ReviewConfirmConflict, res.Review)
				require.Equal(t, 1, counts.get(counts.conflict, "k"), "conflict hook calls")
			} else {
				require.NoError(t, err)
				require.Equal(t, journal.ConfirmAgreed, late.Effect)
				require.Empty(t, rec.Review)
				require.Zero(t, counts.get(counts.conflict, "k"))
			}
			require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls")
			if !tt.conflict {
				return
			}
			// Asked again, the journal says the same, until a person
			// settles it.
			res, err = resender.Do(e.ctx, op)
			requireContradicted(t, res, err, idem.ReviewConfirmConflict)
			_, err = resender.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "charged: the late answer", By: "ops"})
			require.NoError(t, err)
			res, err = resender.Do(e.ctx, op)
			require.NoError(t, err)
			require.Equal(t, "ord_000001", res.ResourceID)
			require.Len(t, e.submits("k"), 2, "nothing sent once settled")
		})
	}
}

// TestConfirmLateProcessingAnswer: a "processing" answer that arrives
// after a confirmation settled the operation, and names another resource
// than the confirmation did, is a contradiction like a settling one: the
// order the server reports for our key is not the one the event named.
// Adyen does not check a merchantReference for uniqueness: with the key
// carried there, the AUTHORISATION of another payment for the same order
// (psp_copy) can settle our operation while our own request is on the
// wire, and its answer, resultCode Received for an asynchronous method
// (iDEAL, a bank transfer: processing), names our payment. It was dropped
// without a trace: two payments, the journal naming only the other.
func TestConfirmLateProcessingAnswer(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, noResultEndpoint(), counts.options())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
	tr := &confirmOnSend{base: e.srv.Client().Transport}
	c, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	tr.confirm = func() error {
		_, err := c.Confirm(context.Background(), "", "k", webhookEvent(idem.StateSucceeded, "psp_copy", "evt_copy"))
		return err
	}
	res, err := c.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.NoError(t, tr.err, "the event's Confirm() during the send")
	require.NoError(t, err, "Submit() reports the confirmed outcome")
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")

	rec := e.record("k")
	require.Equal(t, idem.StateSucceeded, rec.State, "the settled state is kept")
	require.Equal(t, "psp_copy", rec.Result.ResourceID, "the settled resource is kept")
	require.Len(t, rec.Confirmations, 2, "the event, then the server's answer")
	late := rec.Confirmations[1]
	require.Equal(t, idem.ResponseSource, late.Source)
	require.Equal(t, "ord_000001", late.ResourceID, "the answer's resource")
	require.Equal(t, journal.ConfirmConflicted, late.Effect)
	require.Equal(t, idem.ReviewConfirmConflict, rec.Review)
	require.Equal(t, idem.ReviewConfirmConflict, res.Review)
	require.Equal(t, 1, counts.get(counts.conflict, "k"), "conflict hook calls")
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls")
	require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls: the confirmation's")
}

// TestConfirmDuringSubmitKeepsTheAnswer: a webhook that settles an
// operation while its first request is on the wire (Stripe sends
// payment_intent.succeeded as the create's answer travels back) must not
// cost the caller that answer: its body carries what only it carries,
// such as a PaymentIntent's client_secret. The record keeps the settlement
// the event made, with the answer recorded beside it as a confirmation;
// the call's Result has the answer's status and body.
func TestConfirmDuringSubmitKeepsTheAnswer(t *testing.T) {
	for _, st := range []idem.State{idem.StateSucceeded, idem.StateFailed} {
		t.Run(string(st), func(t *testing.T) {
			e := newEnv(t)
			tr := &confirmOnSend{base: e.srv.Client().Transport}
			c, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			id, status := "ord_000001", http.StatusCreated
			if st == idem.StateFailed {
				id, status = "", http.StatusPaymentRequired
				require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: "k"}))
			}
			tr.confirm = func() error {
				_, err := c.Confirm(context.Background(), "", "k", webhookEvent(st, id, "evt_1"))
				return err
			}
			res, err := c.Submit(e.ctx, e.req("k", `{"n":1}`))
			require.NoError(t, tr.err, "the event settled it while the request was on the wire")
			if st == idem.StateSucceeded {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, idem.ErrFailed)
			}
			require.Len(t, e.submits("k"), 1)

			rec := e.record("k")
			require.Equal(t, st, rec.State)
			require.Len(t, rec.Confirmations, 2, "the event, then the server's answer")
			require.Equal(t, journal.ConfirmAgreed, rec.Confirmations[1].Effect)
			require.Empty(t, rec.Result.Body, "the record keeps the settlement the event made")

			require.True(t, res.Confirmed)
			require.Equal(t, status, rec.Confirmations[1].StatusCode)
			require.Equal(t, status, res.StatusCode, "the answer's status")
			var answer struct{ State, ResourceID, Key string }
			require.NoError(t, json.Unmarshal(res.Body, &answer), "the answer's body: %q", res.Body)
			require.Equal(t, st, idem.State(answer.State))
			require.Equal(t, id, answer.ResourceID)
		})
	}
}
