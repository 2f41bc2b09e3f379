package journal_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

var c0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func confirmation(state journal.State, id, event string) journal.Confirmation {
	return journal.Confirmation{State: state, ResourceID: id, Source: "webhook", EventID: event, At: c0.Add(time.Hour)}
}

// keyInUse is the server's answer to an attempt, recorded in state st,
// that another request holds the key.
func keyInUse(st journal.State) journal.Confirmation {
	c := confirmation(st, "", "attempt 2")
	c.Source, c.KeyInUse = "idem: server response", true
	return c
}

// recordIn is a record in state st, with a result naming id if id is set.
func recordIn(st journal.State, review, id string) *journal.Record {
	r := &journal.Record{Scope: "s", Key: "k", State: st, Review: review, Created: c0, Updated: c0}
	if id != "" {
		r.Result = &journal.Result{ResourceID: id, StatusCode: 201}
	}
	if st.Terminal() {
		r.Settled = c0.Add(time.Minute)
	}
	return r
}

// sentOnce gives r an attempt on the wire, journaled before it was sent.
func sentOnce(r *journal.Record) *journal.Record {
	r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptSubmit, Start: c0})
	return r
}

// refusedOnce gives r an attempt the server answered as not executed
// (Stripe's 409 idempotency_key_in_use: another request holds the key).
func refusedOnce(r *journal.Record) *journal.Record {
	r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptSubmit, Start: c0,
		Wrote: true, Done: true, Refused: true, Status: 409})
	return r
}

// lostOnce gives r an attempt written whole whose answer was lost: it
// may have executed.
func lostOnce(r *journal.Record) *journal.Record {
	r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptSubmit, Start: c0,
		Wrote: true, Done: true, Err: "EOF"})
	return r
}

// resentOnce gives r an attempt answered after net/http sent it twice,
// the first copy written whole on a connection that died: both copies
// may have executed.
func resentOnce(r *journal.Record) *journal.Record {
	r = lostOnce(r)
	a := &r.Attempts[len(r.Attempts)-1]
	a.Resent, a.Status, a.Err = true, http.StatusInternalServerError, ""
	return r
}

// foundOtherOnce gives r a result query that found under the key another
// request's result, its note as the client journals it.
func foundOtherOnce(r *journal.Record) *journal.Record {
	r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptQuery, Start: c0,
		Wrote: true, Done: true, Status: http.StatusOK, Err: journal.QueryFoundOther + `: its amount is 250, not 100`})
	return r
}

// contradicted records on r an event that contradicted it, as
// ApplyConfirmation records one.
func contradicted(r *journal.Record) *journal.Record {
	c := confirmation(journal.StateSucceeded, "ch_other", "e0")
	c.Effect = journal.ConfirmConflicted
	r.Confirmations = append(r.Confirmations, c)
	return r
}

// TestApplyConfirmation is the decision table of a confirmation.
func TestApplyConfirmation(t *testing.T) {
	ok, fail := journal.StateSucceeded, journal.StateFailed
	tests := []struct {
		name       string
		rec        *journal.Record
		c          journal.Confirmation
		effect     journal.ConfirmEffect
		err        error
		state      journal.State
		id, review string
	}{
		{"pending never sent settles, another request's", recordIn(journal.StatePending, "", ""), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewKeyInUse},
		{"pending being sent settles", sentOnce(recordIn(journal.StatePending, "", "")), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"pending refused only settles, another request's", refusedOnce(recordIn(journal.StatePending, "", "")), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewKeyInUse},
		{"pending refused then being sent settles", sentOnce(refusedOnce(recordIn(journal.StatePending, "", ""))), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"processing settles", recordIn(journal.StateProcessing, "", ""), confirmation(fail, "", "e1"), journal.ConfirmSettled, nil, fail, "", ""},
		{"processing with the same id settles", recordIn(journal.StateProcessing, "", "ch_1"), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"processing without id keeps the known one", recordIn(journal.StateProcessing, "", "ch_1"), confirmation(ok, "", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"unknown settles", recordIn(journal.StateUnknown, "", ""), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"review settles and clears it", recordIn(journal.StateUnknown, "key expired", ""), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"deadline passed never sent settles, another request's", recordIn(journal.StateUnknown, journal.ReviewDeadlinePassed, ""), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewKeyInUse},
		{"deadline passed refused only settles, another request's", refusedOnce(recordIn(journal.StateUnknown, journal.ReviewDeadlinePassed, "")), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewKeyInUse},
		{"deadline passed after a lost send settles and clears it", lostOnce(refusedOnce(recordIn(journal.StateUnknown, journal.ReviewDeadlinePassed, ""))), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"refused only, flagged by an answer, settles and clears it", refusedOnce(recordIn(journal.StateUnknown, "server refuses resends of a request that may have executed", "")), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"key another request used settles and keeps it", recordIn(journal.StateUnknown, journal.ReviewKeyInUse, ""), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewKeyInUse},
		{"conflict settles and keeps it", recordIn(journal.StateProcessing, journal.ReviewConfirmConflict, "ch_1"), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewConfirmConflict},
		{"processing with another id conflicts", recordIn(journal.StateProcessing, "", "ch_1"), confirmation(ok, "ch_2", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, journal.StateProcessing, "ch_1", journal.ReviewConfirmConflict},
		{"settled agrees", recordIn(ok, "", "ch_1"), confirmation(ok, "ch_1", "e1"), journal.ConfirmAgreed, nil, ok, "ch_1", ""},
		{"settled agrees without id", recordIn(ok, "", "ch_1"), confirmation(ok, "", "e1"), journal.ConfirmAgreed, nil, ok, "ch_1", ""},
		{"failed agrees", recordIn(fail, "", ""), confirmation(fail, "", "e1"), journal.ConfirmAgreed, nil, fail, "", ""},
		{"succeeded against failed", recordIn(ok, "", "ch_1"), confirmation(fail, "", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewConfirmConflict},
		{"failed against succeeded", recordIn(fail, "", ""), confirmation(ok, "ch_1", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, fail, "", journal.ReviewConfirmConflict},
		{"another resource id", recordIn(ok, "", "ch_1"), confirmation(ok, "ch_2", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewConfirmConflict},
		// The server's answer that another request holds the key: what
		// settled the record may be that request's.
		{"key in use against succeeded", recordIn(ok, "", "ch_1"), keyInUse(ok), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewKeyInUse},
		{"key in use against failed", recordIn(fail, "", ""), keyInUse(fail), journal.ConfirmConflicted, journal.ErrConfirmConflict, fail, "", journal.ReviewKeyInUse},
		{"conflict keeps key in use", recordIn(ok, journal.ReviewKeyInUse, "ch_1"), confirmation(fail, "ch_2", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewKeyInUse},
		{"conflict keeps made twice open", recordIn(journal.StateProcessing, journal.ReviewMadeTwice, "ch_1"), confirmation(ok, "ch_2", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, journal.StateProcessing, "ch_1", journal.ReviewMadeTwice},
		{"conflict keeps key ignored open", recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, "ch_1"), confirmation(ok, "ch_2", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, journal.StateUnknown, "ch_1", journal.ReviewKeyIgnored},
		{"settling key ignored clears it", recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, ""), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"settling after a kept conflict flags it", contradicted(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, "ch_1")), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewConfirmConflict},
		// A server that ignores the key took each send for a new request:
		// an event tells of one of them.
		{"settling key ignored after one send clears it", lostOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, "")), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"settling key ignored after a refusal and a send clears it", lostOnce(refusedOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, ""))), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		{"settling key ignored after two sends flags maybe twice", lostOnce(lostOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, ""))), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewMaybeTwice},
		{"failing key ignored after two sends flags maybe twice", sentOnce(lostOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, ""))), confirmation(fail, "ch_2", "e1"), journal.ConfirmSettled, nil, fail, "ch_2", journal.ReviewMaybeTwice},
		{"settling key ignored after one send net/http resent flags maybe twice", resentOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, "")), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewMaybeTwice},
		// The event may be the other request's whose result the query
		// found under the key, the flag kept for the endpoint's sake.
		{"settling key ignored after one send and another request's result flags key in use", foundOtherOnce(lostOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, ""))), confirmation(ok, "pay_0", "e1"), journal.ConfirmSettled, nil, ok, "pay_0", journal.ReviewKeyInUse},
		{"settling key ignored after two sends and another request's result flags maybe twice", foundOtherOnce(lostOnce(lostOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, "")))), confirmation(fail, "pay_0", "e1"), journal.ConfirmSettled, nil, fail, "pay_0", journal.ReviewMaybeTwice},
		{"settling two sends not flagged clears nothing", lostOnce(lostOnce(recordIn(journal.StateUnknown, "", ""))), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", ""},
		// Two charges possible comes before a contradiction or a key
		// another request holds: those stay recorded beside it.
		{"settling key ignored after two sends and a kept conflict flags maybe twice", contradicted(lostOnce(lostOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, "ch_1")))), confirmation(ok, "ch_1", "e1"), journal.ConfirmSettled, nil, ok, "ch_1", journal.ReviewMaybeTwice},
		{"key in use settling key ignored after two sends flags maybe twice", lostOnce(lostOnce(recordIn(journal.StateUnknown, journal.ReviewKeyIgnored, ""))), keyInUse(fail), journal.ConfirmSettled, nil, fail, "", journal.ReviewMaybeTwice},
		{"maybe twice settled agrees and keeps it", recordIn(ok, journal.ReviewMaybeTwice, "ch_1"), confirmation(ok, "ch_1", "e1"), journal.ConfirmAgreed, nil, ok, "ch_1", journal.ReviewMaybeTwice},
		{"conflict keeps maybe twice settled", recordIn(ok, journal.ReviewMaybeTwice, "ch_1"), confirmation(fail, "ch_1", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewMaybeTwice},
		{"another resource keeps maybe twice settled", recordIn(fail, journal.ReviewMaybeTwice, "ch_1"), confirmation(ok, "ch_2", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, fail, "ch_1", journal.ReviewMaybeTwice},
		{"key in use keeps maybe twice settled", recordIn(ok, journal.ReviewMaybeTwice, "ch_1"), keyInUse(ok), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewMaybeTwice},
		{"conflict replaces made twice settled", recordIn(ok, journal.ReviewMadeTwice, "ch_1"), confirmation(fail, "ch_1", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewConfirmConflict},
		{"key in use keeps a conflict", recordIn(ok, journal.ReviewConfirmConflict, "ch_1"), keyInUse(ok), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewConfirmConflict},
		{"key in use against another state conflicts", recordIn(ok, "", "ch_1"), keyInUse(fail), journal.ConfirmConflicted, journal.ErrConfirmConflict, ok, "ch_1", journal.ReviewConfirmConflict},
		{"key in use settles an open record flagged", sentOnce(recordIn(journal.StateProcessing, "", "")), keyInUse(fail), journal.ConfirmSettled, nil, fail, "", journal.ReviewKeyInUse},
		{"non-terminal state", recordIn(journal.StatePending, "", ""), confirmation(journal.StateProcessing, "", "e1"), journal.ConfirmInvalid, journal.ErrInvalid, journal.StatePending, "", ""},
		// The server's answer that it is executing the request (a 409 "in
		// progress", a 202) contradicts only a failure.
		{"processing against failed", recordIn(fail, "", ""), confirmation(journal.StateProcessing, "", "e1"), journal.ConfirmConflicted, journal.ErrConfirmConflict, fail, "", journal.ReviewConfirmConflict},
		{"processing against succeeded", recordIn(ok, "", "ch_1"), confirmation(journal.StateProcessing, "ch_1", "e1"), journal.ConfirmInvalid, journal.ErrInvalid, ok, "ch_1", ""},
		{"processing against processing", recordIn(journal.StateProcessing, "", "ch_1"), confirmation(journal.StateProcessing, "ch_1", "e1"), journal.ConfirmInvalid, journal.ErrInvalid, journal.StateProcessing, "ch_1", ""},
		{"no source", recordIn(journal.StatePending, "", ""), journal.Confirmation{State: ok, EventID: "e", At: c0}, journal.ConfirmInvalid, journal.ErrInvalid, journal.StatePending, "", ""},
		{"no event id", recordIn(journal.StatePending, "", ""), journal.Confirmation{State: ok, Source: "w", At: c0}, journal.ConfirmInvalid, journal.ErrInvalid, journal.StatePending, "", ""},
		{"no time", recordIn(journal.StatePending, "", ""), journal.Confirmation{State: ok, Source: "w", EventID: "e"}, journal.ConfirmInvalid, journal.ErrInvalid, journal.StatePending, "", ""},
		{"huge reason", recordIn(journal.StatePending, "", ""), journal.Confirmation{State: ok, Source: "w", EventID: "e", At: c0, Reason: strings.Repeat("x", 5000)}, journal.ConfirmInvalid, journal.ErrInvalid, journal.StatePending, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tt.rec
			wasSettled, had := rec.Settled, len(rec.Confirmations)
			effect, err := journal.ApplyConfirmation(rec, tt.c)
			require.Equal(t, tt.effect, effect, "effect")
			if tt.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.err)
			}
			require.Equal(t, tt.state, rec.State, "state")
			id := ""
			if rec.Result != nil {
				id = rec.Result.ResourceID
			}
			require.Equal(t, tt.id, id, "resource id")
			require.Equal(t, tt.review, rec.Review, "review")
			if !effect.Changed() {
				require.Len(t, rec.Confirmations, had, "a refused confirmation is not recorded")
				return
			}
			require.Len(t, rec.Confirmations, had+1)
			require.Equal(t, effect, rec.Confirmations[had].Effect, "recorded effect")
			if effect == journal.ConfirmSettled {
				require.Equal(t, tt.c.At, rec.Settled, "Settled")
			} else {
				require.Equal(t, wasSettled, rec.Settled, "Settled of a record that was already settled")
			}
		})
	}
}

// The same event twice changes nothing and gets the first answer.
func TestApplyConfirmationDuplicate(t *testing.T) {
	for _, tt := range []struct {
		name string
		rec  *journal.Record
		c    journal.Confirmation
		err  error
	}{
		{"settling", recordIn(journal.StateUnknown, "", ""), confirmation(journal.StateSucceeded, "ch_1", "e1"), nil},
		{"conflicting", recordIn(journal.StateFailed, "", ""), confirmation(journal.StateSucceeded, "ch_1", "e1"), journal.ErrConfirmConflict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, first := journal.ApplyConfirmation(tt.rec, tt.c)
			after := *tt.rec
			again := tt.c
			again.At = again.At.Add(time.Hour) // a redelivery, later
			effect, err := journal.ApplyConfirmation(tt.rec, again)
			require.Equal(t, journal.ConfirmDuplicate, effect)
			require.Equal(t, errors.Is(first, journal.ErrConfirmConflict), errors.Is(err, journal.ErrConfirmConflict), "the same answer: first %v, again %v", first, err)
			if tt.err == nil {
				require.NoError(t, err)
			}
			require.Equal(t, &after, tt.rec, "a duplicate changes nothing")

			other := tt.c
			other.State = journal.StateFailed
			other.ResourceID = ""
			if tt.c.State == journal.StateFailed {
				other.State = journal.StateSucceeded
			}
			effect, err = journal.ApplyConfirmation(tt.rec, other)
			require.Equal(t, journal.ConfirmInvalid, effect, "an event id redelivered with another outcome")
			require.ErrorIs(t, err, journal.ErrInvalid)
		})
	}
}

// A record keeps the latest MaxConfirmations events.
func TestApplyConfirmationBounded(t *testing.T) {
	rec := recordIn(journal.StateSucceeded, "", "ch_1")
	for i := range journal.MaxConfirmations + 5 {
		effect, err := journal.ApplyConfirmation(rec, confirmation(journal.StateSucceeded, "ch_1", "e"+string(rune('a'+i))))
		require.NoError(t, err)
		require.Equal(t, journal.ConfirmAgreed, effect)
	}
	require.Len(t, rec.Confirmations, journal.MaxConfirmations)
	require.Equal(t, "e"+string(rune('a'+journal.MaxConfirmations+4)), rec.Confirmations[journal.MaxConfirmations-1].EventID, "the latest is kept")
}

// A run of other events (a shopper's refused cards, each its own
// pspReference under the merchantReference that carries the key: Adyen's
// AUTHORISATION success "false",
// https://docs.adyen.com/development-resources/webhooks/webhook-types/)
// does not push out of the bound the failure that disputes the success,
// nor the event that settled the record: the client reads them
// (failureAgainst, Result.Confirmed).
func TestApplyConfirmationBoundKeepsDispute(t *testing.T) {
	rec := recordIn(journal.StateUnknown, "", "")
	requireApplied(t, rec, confirmation(journal.StateSucceeded, "psp_ours", "settled"), journal.ConfirmSettled, nil)
	requireApplied(t, rec, confirmation(journal.StateFailed, "psp_ours", "disputed"), journal.ConfirmConflicted, journal.ErrConfirmConflict)
	for i := range journal.MaxConfirmations + 3 {
		requireApplied(t, rec, confirmation(journal.StateFailed, fmt.Sprintf("psp_refused_%d", i), fmt.Sprintf("refused_%d", i)), journal.ConfirmConflicted, journal.ErrConfirmConflict)
	}
	require.Len(t, rec.Confirmations, journal.MaxConfirmations)
	require.Equal(t, "settled", rec.Confirmations[0].EventID, "the settling event is kept")
	require.Equal(t, "disputed", rec.Confirmations[1].EventID, "the dispute is kept")
	require.Equal(t, fmt.Sprintf("refused_%d", journal.MaxConfirmations+2), rec.Confirmations[journal.MaxConfirmations-1].EventID, "the latest is kept")
	require.Equal(t, fmt.Sprintf("refused_%d", 5), rec.Confirmations[2].EventID, "the oldest others are dropped")
}

// A record settled without a resource id (resolved by hand) takes the id
// of the first event that agrees with it naming one: Adyen does not check
// a merchantReference for uniqueness, and a shopper who paid in two
// checkout sessions for one order made two payments, each its own
// pspReference (https://docs.adyen.com/development-resources/webhooks/webhook-types/).
// The second one's AUTHORISATION success "true" agreed as well: a payment
// made twice, unnoticed.
func TestApplyConfirmationSettledWithoutResource(t *testing.T) {
	rec := recordIn(journal.StateSucceeded, "", "")
	requireApplied(t, rec, confirmation(journal.StateSucceeded, "psp_a", "a"), journal.ConfirmAgreed, nil)
	requireApplied(t, rec, confirmation(journal.StateSucceeded, "", "no id"), journal.ConfirmAgreed, nil)
	requireApplied(t, rec, confirmation(journal.StateSucceeded, "psp_a", "a again"), journal.ConfirmAgreed, nil)

	requireApplied(t, rec, confirmation(journal.StateSucceeded, "psp_b", "b"), journal.ConfirmConflicted, journal.ErrConfirmConflict)
	require.Equal(t, journal.ReviewConfirmConflict, rec.Review)
	require.Nil(t, rec.Result, "the result is kept as it was")

	// Its anchor outlives the bound.
	for i := range journal.MaxConfirmations {
		requireApplied(t, rec, confirmation(journal.StateSucceeded, "", fmt.Sprintf("n%d", i)), journal.ConfirmAgreed, nil)
	}
	requireApplied(t, rec, confirmation(journal.StateSucceeded, "psp_c", "c"), journal.ConfirmConflicted, journal.ErrConfirmConflict)
}

// requireApplied applies c to rec and asserts its effect and error (nil,
// or one it matches).
func requireApplied(t *testing.T, rec *journal.Record, c journal.Confirmation, effect journal.ConfirmEffect, want error) {
	t.Helper()
	got, err := journal.ApplyConfirmation(rec, c)
	if want == nil {
		require.NoError(t, err, "ApplyConfirmation(%s)", c.EventID)
	} else {
		require.ErrorIs(t, err, want, "ApplyConfirmation(%s)", c.EventID)
	}
	require.Equal(t, effect, got, "ApplyConfirmation(%s): effect", c.EventID)
}
