package idem_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// settleCounts counts, per key, the calls of the settle hook, the settle
// func, the conflict hook and the review hook.
type settleCounts struct {
	mu                      sync.Mutex
	hook, fn, conflict      map[string]int
	review                  map[string]int
	lastConflict            idem.Confirmation
	lastConflictResultState idem.State
}

func newSettleCounts() *settleCounts {
	return &settleCounts{hook: map[string]int{}, fn: map[string]int{}, conflict: map[string]int{}, review: map[string]int{}}
}

func (s *settleCounts) options() envOption {
	return clientOpts(
		idem.WithHooks(idem.Hooks{
			Settle: func(_ context.Context, r *idem.Result) { s.add(s.hook, r.Key) },
			Review: func(_ context.Context, r *idem.Result) { s.add(s.review, r.Key) },
			ConfirmConflict: func(_ context.Context, r *idem.Result, c idem.Confirmation) {
				s.add(s.conflict, r.Key)
				s.mu.Lock()
				s.lastConflict, s.lastConflictResultState = c, r.State
				s.mu.Unlock()
			},
		}),
		idem.WithSettleFunc(func(r *idem.Result) { s.add(s.fn, r.Key) }),
	)
}

func (s *settleCounts) add(m map[string]int, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m[key]++
}

func (s *settleCounts) get(m map[string]int, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[key]
}

// processingEnv returns an env with hook counts and no result endpoint,
// where operation "k" was answered "processing" (ord_000001) and is open.
func processingEnv(t testing.TB) (*settleCounts, *env) {
	t.Helper()
	counts := newSettleCounts()
	e := newEnv(t, noResultEndpoint(), counts.options())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	return counts, e
}

func webhookEvent(state idem.State, id, eventID string) idem.Confirmation {
	return idem.Confirmation{State: state, ResourceID: id, Source: "fake-webhook", EventID: eventID, Reason: "order." + string(state)}
}

// TestConfirmOpen: a confirmation settles an operation in every open state
// for good: nothing is sent for it afterwards, and each hook fires once.
func TestConfirmOpen(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(e *env) // leaves key "k" open
		state  idem.State   // before the confirmation
		review string
		id     string // the resource id the confirmation names
		after  string // the review after it
	}{
		// Prepared, never sent: the event is another request's
		// (TestConfirmOfAnIntentNeverSent).
		{"pending", func(e *env) {
			_, err := e.client.Prepare(e.ctx, e.req("k", `{"n":1}`))
			require.NoError(e.t, err)
		}, idem.StatePending, "", "ord_x", idem.ReviewKeyInUse},
		{"processing", func(e *env) {
			require.NoError(e.t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
			_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
			require.ErrorIs(e.t, err, idem.ErrUnknownOutcome)
		}, idem.StateProcessing, "", "ord_000001", ""},
		{"unknown", func(e *env) {
			require.NoError(e.t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
			_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
			require.ErrorIs(e.t, err, idem.ErrUnknownOutcome)
		}, idem.StateUnknown, "", "ord_000001", ""},
		{"flagged: key window passed", func(e *env) {
			require.NoError(e.t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
			_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
			require.ErrorIs(e.t, err, idem.ErrUnknownOutcome)
			e.clock.Advance(idem.DefaultKeyRetention + time.Minute)
			_, err = e.client.Resume(e.ctx)
			require.NoError(e.t, err)
		}, idem.StateUnknown, idem.ReviewKeyExpired, "ord_000001", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := newSettleCounts()
			e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)), counts.options())
			tt.setup(e)
			before := e.record("k")
			require.Equal(t, tt.state, before.State, "state before the confirmation")
			require.Equal(t, tt.review, before.Review, "review before the confirmation")
			sent := len(e.submits("k"))

			res, err := e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, tt.id, "evt_1"))
			require.NoError(t, err, "Confirm()")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, tt.id, res.ResourceID)
			require.True(t, res.Confirmed, "Result.Confirmed")
			require.Equal(t, tt.after, res.Review)
			rec := e.record("k")
			require.Equal(t, idem.StateSucceeded, rec.State, "journaled state")
			require.Len(t, rec.Confirmations, 1)
			require.Equal(t, "fake-webhook", rec.Confirmations[0].Source, "journaled source")
			require.Equal(t, "evt_1", rec.Confirmations[0].EventID, "journaled event id")
			require.Equal(t, e.clock.Now(), rec.Settled, "Settled: the client's clock")

			// Terminal is final: nothing is sent for it again.
			op, err := e.client.Lookup(e.ctx, "", "k")
			require.NoError(t, err)
			require.Len(t, op.Confirmations, 1, "Operation.Confirmations")
			got, err := e.client.Do(e.ctx, op)
			if tt.after == idem.ReviewKeyInUse {
				// The success may be another request's: no nil error for it.
				require.ErrorIs(t, err, idem.ErrNeedsReview, "Do() of a confirmed operation")
			} else {
				require.NoError(t, err, "Do() of a confirmed operation")
			}
			require.Equal(t, tt.id, got.ResourceID)
			sum, err := e.client.Resume(e.ctx)
			require.NoError(t, err)
			require.Zero(t, sum.Visited, "Resume() visits")
			require.Equal(t, sent, len(e.submits("k")), "submits after the confirmation")

			require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls")
			require.Equal(t, 1, counts.get(counts.fn, "k"), "settle func calls")
			require.Zero(t, counts.get(counts.conflict, "k"), "conflict hook calls")
		})
	}
}

// TestConfirmSettled: on a settled operation an agreeing confirmation is
// recorded and changes nothing; a contradicting one never overwrites it,
// flags it for review and reports the conflict once.
func TestConfirmSettled(t *testing.T) {
	tests := []struct {
		name     string
		c        idem.Confirmation
		conflict bool
	}{
		{"same state and id", webhookEvent(idem.StateSucceeded, "ord_000001", "e"), false},
		{"same state, no id", webhookEvent(idem.StateSucceeded, "", "e"), false},
		{"failed against succeeded", webhookEvent(idem.StateFailed, "", "e"), true},
		{"another resource id", webhookEvent(idem.StateSucceeded, "ord_999999", "e"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := newSettleCounts()
			e := newEnv(t, counts.options())
			settled, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
			require.NoError(t, err)
			require.Equal(t, "ord_000001", settled.ResourceID)
			require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls after Submit")
			before := e.record("k")

			for delivery := 1; delivery <= 2; delivery++ { // the provider redelivers
				res, err := e.client.Confirm(e.ctx, "", "k", tt.c)
				require.NotNil(t, res, "delivery %d: Confirm() result", delivery)
				require.Equal(t, idem.StateSucceeded, res.State, "delivery %d: the settled state is kept", delivery)
				require.Equal(t, "ord_000001", res.ResourceID, "delivery %d: the settled resource is kept", delivery)
				if tt.conflict {
					require.ErrorIs(t, err, idem.ErrConfirmConflict, "delivery %d", delivery)
					require.ErrorIs(t, err, journal.ErrConfirmConflict, "delivery %d", delivery)
					require.Equal(t, idem.ReviewConfirmConflict, res.Review, "delivery %d: Result.Review", delivery)
				} else {
					require.NoError(t, err, "delivery %d", delivery)
					require.Empty(t, res.Review)
				}
			}
			rec := e.record("k")
			require.Equal(t, before.State, rec.State)
			require.Equal(t, before.Result, rec.Result, "the result is never overwritten")
			require.Equal(t, before.Settled, rec.Settled)
			require.Len(t, rec.Confirmations, 1, "a redelivery is not recorded twice")
			require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls")
			want := 0
			if tt.conflict {
				want = 1
				require.Equal(t, idem.ReviewConfirmConflict, rec.Review)
				require.Equal(t, tt.c.EventID, counts.lastConflict.EventID, "the hook gets the confirmation")
				require.Equal(t, idem.StateSucceeded, counts.lastConflictResultState, "the hook gets the kept outcome")
				review, err := e.client.List(e.ctx, idem.Filter{Review: true})
				require.NoError(t, err)
				require.Len(t, review, 1, "List(Review) shows the conflict")
			}
			require.Equal(t, want, counts.get(counts.conflict, "k"), "conflict hook calls")
			require.Equal(t, want, counts.get(counts.review, "k"), "review hook calls: once for the flagging, not per redelivery")
			require.Equal(t, 1, len(e.submits("k")), "nothing sent")
		})
	}
}

// TestConfirmEvents: events arrive duplicated and out of order; the first
// that settles wins, the others agree or are duplicates, and a late
// contradiction is flagged, never applied.
func TestConfirmEvents(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)), counts.options())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	// The provider sent "created" then "paid"; they arrive paid, created,
	// paid again, created again.
	paid := webhookEvent(idem.StateSucceeded, "ord_000001", "evt_paid")
	created := webhookEvent(idem.StateSucceeded, "ord_000001", "evt_created")
	for i, c := range []idem.Confirmation{paid, created, paid, created} {
		res, err := e.client.Confirm(e.ctx, "", "k", c)
		require.NoError(t, err, "delivery %d (%s)", i+1, c.EventID)
		require.Equal(t, idem.StateSucceeded, res.State, "delivery %d", i+1)
	}
	rec := e.record("k")
	require.Len(t, rec.Confirmations, 2)
	require.Equal(t, journal.ConfirmSettled, rec.Confirmations[0].Effect, "the first delivery settled it")
	require.Equal(t, journal.ConfirmAgreed, rec.Confirmations[1].Effect, "the late one agreed")
	require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls")

	// A refund-like contradiction arriving last is flagged, not applied.
	_, err = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateFailed, "", "evt_failed"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict)
	rec = e.record("k")
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.Equal(t, idem.ReviewConfirmConflict, rec.Review)

	// The same event id with another outcome is a caller's bug.
	bad := paid
	bad.State = idem.StateFailed
	_, err = e.client.Confirm(e.ctx, "", "k", bad)
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.Len(t, e.record("k").Confirmations, 3, "nothing recorded for it")

	// A person settles the conflict; Resolve clears the flag.
	res, err := e.client.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, Reason: "refund was for another order", By: "ops"})
	require.NoError(t, err)
	require.Empty(t, res.Review)
}

// TestConfirmUnknownKey: an event for a key the journal does not know is a
// clear error, and creates nothing.
func TestConfirmUnknownKey(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, counts.options())
	_, err := e.client.Confirm(e.ctx, "", "never-journaled", webhookEvent(idem.StateSucceeded, "ord_1", "evt_1"))
	require.ErrorIs(t, err, idem.ErrNotFound)
	require.ErrorIs(t, err, journal.ErrNotFound)
	_, err = e.store.Get(e.ctx, idem.DefaultScope, "never-journaled")
	require.ErrorIs(t, err, journal.ErrNotFound, "nothing created")
	all, err := e.client.List(e.ctx, idem.Filter{AllScopes: true})
	require.NoError(t, err)
	require.Empty(t, all, "the journal is empty")
	require.Zero(t, counts.get(counts.hook, "never-journaled"))
}

// TestConfirmInvalid: bad input gets ErrInvalidRequest and changes nothing.
func TestConfirmInvalid(t *testing.T) {
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	before := e.record("k")
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	tests := []struct {
		name string
		key  string
		c    idem.Confirmation
	}{
		{"empty key", "", webhookEvent(idem.StateSucceeded, "", "e")},
		{"processing", "k", webhookEvent(idem.StateProcessing, "", "e")},
		{"unknown", "k", webhookEvent(idem.StateUnknown, "", "e")},
		{"empty state", "k", webhookEvent("", "", "e")},
		{"no source", "k", idem.Confirmation{State: idem.StateSucceeded, EventID: "e"}},
		{"no event id", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s"}},
		{"blank event id", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s", EventID: "  "}},
		{"huge event id", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s", EventID: string(long)}},
		{"newline in event id", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s", EventID: "evt_1\nsucceeded by hand"}},
		{"NUL in source", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s\x00", EventID: "e"}},
		{"escape in resource id", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s", EventID: "e", ResourceID: "ch_1\x1b[2K"}},
		{"invalid UTF-8 event id", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s", EventID: "e\xff"}},
		{"invalid UTF-8 reason", "k", idem.Confirmation{State: idem.StateSucceeded, Source: "s", EventID: "e", Reason: "\xc3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.client.Confirm(e.ctx, "", tt.key, tt.c)
			require.ErrorIs(t, err, idem.ErrInvalidRequest)
			require.Nil(t, res)
			require.Equal(t, before, e.record("k"), "nothing written")
		})
	}
	require.NoError(t, e.client.Close())
	_, err = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "", "e"))
	require.ErrorIs(t, err, idem.ErrClosed)
}

// A reason longer than the journal keeps (a handler passing the event's
// whole description, Adyen's reason with its raw acquirer message) had
// the event refused with ErrInvalidRequest: answered 5xx, as the README
// says for any other error, the provider redelivered it for days, each
// refused, and the operation stayed unknown. It is cut at a character's
// boundary, as a decoder's reason is.
func TestConfirmLongReasonIsCut(t *testing.T) {
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	conf := webhookEvent(idem.StateSucceeded, "ord_000001", "evt_1")
	conf.Reason = "payment_intent.succeeded: " + strings.Repeat("é", 1500)
	res, err := e.client.Confirm(e.ctx, "", "k", conf)
	require.NoError(t, err, "Confirm()")
	require.Equal(t, idem.StateSucceeded, res.State)
	rec := e.record("k")
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.Len(t, rec.Confirmations, 1)
	got := rec.Confirmations[0].Reason
	require.LessOrEqual(t, len(got), 1024, "journaled reason")
	require.True(t, utf8.ValidString(got), "cut at a character's boundary")
	require.True(t, strings.HasPrefix(conf.Reason, got), "a prefix of the event's reason")

	// A redelivery is the same event: harmless.
	_, err = e.client.Confirm(e.ctx, "", "k", conf)
	require.NoError(t, err, "redelivery")
	require.Len(t, e.record("k").Confirmations, 1)
}

// TestConfirmResourceLookup: an event that carries only the provider's
// object id finds the open operation whose result named it.
func TestConfirmResourceLookup(t *testing.T) {
	e := newEnv(t, noResultEndpoint())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	_, err = e.client.Submit(e.ctx, e.req("settled", `{"n":2}`))
	require.NoError(t, err)

	op, err := e.client.LookupResource(e.ctx, "", "ord_000001")
	require.NoError(t, err)
	require.Equal(t, "k", op.Key)
	_, err = e.client.LookupResource(e.ctx, "", "ord_000002")
	require.ErrorIs(t, err, idem.ErrNotFound, "a settled operation is not searched")
	_, err = e.client.LookupResource(e.ctx, "other-scope", "ord_000001")
	require.ErrorIs(t, err, idem.ErrNotFound, "another scope")
	_, err = e.client.LookupResource(e.ctx, "", "")
	require.ErrorIs(t, err, idem.ErrInvalidRequest)

	_, err = e.client.Confirm(e.ctx, op.Scope, op.Key, webhookEvent(idem.StateSucceeded, "ord_000001", "evt_1"))
	require.NoError(t, err)
	_, err = e.client.LookupResource(e.ctx, "", "ord_000001")
	require.ErrorIs(t, err, idem.ErrNotFound, "settled now")
}

// TestConfirmConflictOpen: a confirmation naming another resource than the
// one an open operation's server reported flags it, and stops resends.
func TestConfirmConflictOpen(t *testing.T) {
	counts, e := processingEnv(t)
	res, err := e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "ord_other", "evt_1"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict)
	require.Equal(t, idem.StateProcessing, res.State, "still open")
	require.Equal(t, idem.ReviewConfirmConflict, res.Review)
	sent := len(e.submits("k"))
	e.clock.Advance(2 * time.Hour)
	_, err = e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, sent, len(e.submits("k")), "automatic reconciliation never resends a flagged operation")
	require.Equal(t, 1, counts.get(counts.conflict, "k"))
	require.Zero(t, counts.get(counts.hook, "k"))

	// An explicit Do past the key window flags it for that too, and a
	// later answer could settle it; neither hides the contradiction.
	op, err := e.client.Lookup(e.ctx, "", "k")
	require.NoError(t, err)
	_, err = e.client.Do(e.ctx, op)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, sent, len(e.submits("k")), "past the key window: no resend")
	require.Equal(t, idem.ReviewConfirmConflict, e.record("k").Review, "the conflict is still the reason")
}
