package idem_test

import (
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
	submitter, err := idem.New(e.store, append(e.baseOpts(),
		idem.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = submitter.Close() })
	resender, err := idem.New(e.store, append(e.baseOpts(),
		idem.WithMaxAttempts(idem.DefaultMaxAttempts), idem.WithHTTPClient(&http.Client{Transport: tr}))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resender.Close() })

	won := map[journal.ConfirmEffect]int{}
	rounds := 0
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
		require.Len(t, rec.Confirmations, 1)
		effect := rec.Confirmations[0].Effect
		won[effect]++
		require.Equal(t, 1, counts.get(counts.hook, key), "round %d: settle hook calls", rounds)
		wantFn := 0
		if effect == journal.ConfirmSettled {
			wantFn = 1 // the settle func hears of what nobody waited for
		}
		require.Equal(t, wantFn, counts.get(counts.fn, key), "round %d: settle func calls", rounds)
	}
	require.GreaterOrEqual(t, rounds, 20, "races run before the deadline")
	t.Logf("%d races: the confirmation settled %d, agreed with the resend's settlement %d", rounds, won[journal.ConfirmSettled], won[journal.ConfirmAgreed])
}
