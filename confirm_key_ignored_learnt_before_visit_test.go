package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// flagCutStore is a Store on which, once armed, the next Update commits
// but reports journal.ErrMaybeCommitted (cutUpdate), as a PostgreSQL
// journal does when the connection breaks after the COMMIT was sent, or
// the next Confirm fails before anything is written (refuseConfirm), as
// when the database refuses the connection while it restarts (modelled on
// pgjournal's errors).
type flagCutStore struct {
	*journal.Store

	mu                       sync.Mutex
	cutUpdate, refuseConfirm bool
}

func (s *flagCutStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	rec, err := s.Store.Update(ctx, scope, key, fn)
	s.mu.Lock()
	cut := s.cutUpdate && err == nil
	s.cutUpdate = s.cutUpdate && !cut
	s.mu.Unlock()
	if cut {
		return nil, fmt.Errorf("pgjournal: update %q: %w: unexpected EOF", key, journal.ErrMaybeCommitted)
	}
	return rec, err
}

func (s *flagCutStore) Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error) {
	s.mu.Lock()
	refuse := s.refuseConfirm
	s.refuseConfirm = false
	s.mu.Unlock()
	if refuse {
		return nil, fmt.Errorf("pgjournal: confirm %q: %w", key, syscall.ECONNREFUSED)
	}
	return s.Store.Confirm(ctx, scope, key, c)
}

// A payment to a Solidgate endpoint that does not de-duplicate by the key
// ("A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) loses its
// answer (pay_1 charged); the order's status endpoint finds nothing, and
// idem, not knowing yet that the endpoint ignores the key, resends with the
// same key as the caller gives up: that answer is lost too (pay_2
// charged). Another payment's answer then says the endpoint ignores the
// key (k0's 500, marked ignored, leaves it open and flagged). Before any
// drive visits the first, its "Updated Card Order" event comes, in the
// same process or in one restarted on the same journal: Confirm settled it
// clean (no review), though both sends may have charged. It keeps
// ReviewMaybeTwice, as after a drive that flags it first
// (TestIgnoredKeyLearntAfterTwoLostSendsKeepsMaybeTwice); after one lost
// send it settles clean, as before; the event redelivered changes nothing.
//
// The journal may fail Confirm's writes. When it refused the confirmation
// after Confirm's flag, the handler answered 5xx and the redelivery
// settled it ReviewMaybeTwice with no Review hook: the flagging was
// Confirm's own, with no drive to report it, and the redelivery, finding
// it flagged, calls Settle only. When the flag's commit lost its answer
// (committed), Confirm failed without reading it back, and the
// redelivery found it flagged: no Review hook either. A person learnt of
// the two charges from the Settle hook's Result only. Now the refused
// confirmation reports the flag it leaves, and the lost answer is read
// back: settled at the first delivery, the Review hook called once.
func TestConfirmKeyIgnoredLearntBeforeAnyVisitKeepsMaybeTwice(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sends    int  // the first payment's lost sends
		restart  bool // the event comes to a new process on the journal
		want     string
		wantHook []string
		// The first delivery's Confirm: its flag's commit answer lost
		// (cut), or the confirmation refused (refuse, with first the
		// Review it leaves in the journal).
		cut, refuse bool
		first       string
	}{
		{"two sends, same process", 2, false, idem.ReviewMaybeTwice, []string{"k " + idem.ReviewMaybeTwice}, false, false, ""},
		{"two sends, after a restart", 2, true, idem.ReviewMaybeTwice, []string{"k " + idem.ReviewMaybeTwice}, false, false, ""},
		{"one send, same process", 1, false, "", nil, false, false, ""},
		{"one send, after a restart", 1, true, "", nil, false, false, ""},
		{"two sends, the flag's commit answer lost", 2, false, idem.ReviewMaybeTwice, []string{"k " + idem.ReviewMaybeTwice}, true, false, ""},
		{"two sends, the confirmation refused", 2, true, idem.ReviewMaybeTwice, []string{"k " + idem.ReviewKeyIgnored}, false, true, idem.ReviewKeyIgnored},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu      sync.Mutex
				stop    context.CancelFunc // the call whose request this is gives up
				reviews []string
				settled []string
			)
			s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
				switch {
				case n < tt.sends:
					dropConnection(w) // pay_1 charged, its answer lost
				case n == tt.sends:
					mu.Lock()
					stop()
					mu.Unlock()
					dropConnection(w) // pay_n charged, its answer lost
				default:
					ignoredInternalError(w) // k0's payment, charged
				}
			})
			path := filepath.Join(t.TempDir(), "idem.journal")
			var cuts *flagCutStore
			open := func() (*idem.Client, *journal.Store) {
				store, err := journal.Open(path)
				require.NoError(t, err)
				cuts = &flagCutStore{Store: store}
				c, err := idem.New(cuts, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)),
					idem.WithHooks(idem.Hooks{
						Review: func(_ context.Context, r *idem.Result) {
							mu.Lock()
							reviews = append(reviews, r.Key+" "+r.Review)
							mu.Unlock()
						},
						Settle: func(_ context.Context, r *idem.Result) {
							mu.Lock()
							settled = append(settled, r.Key+" "+r.Review)
							mu.Unlock()
						},
					}))
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close(); _ = store.Close() })
				return c, store
			}
			c, store := open()
			url := s.srv.URL + "/api/v1/charge"

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			mu.Lock()
			stop = cancel
			mu.Unlock()
			res, err := c.Submit(ctx, idem.Request{Key: "k", URL: url, ResultURL: s.srv.URL + "/api/v1/orders/o-1",
				Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Empty(t, res.Review, "Submit(): nothing said yet that the endpoint ignores the key")
			charges := []string{"k", "k"}[:tt.sends]
			s.requireSeen(t, charges, tt.sends-1)

			res, err = c.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
			require.ErrorIs(t, err, idem.ErrNeedsReview, "the other payment, whose answer says the key is ignored")
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			charges = append(charges, "k0")
			s.requireSeen(t, charges, tt.sends-1)

			if tt.restart {
				require.NoError(t, c.Close())
				require.NoError(t, store.Close())
				c, _ = open()
			}
			mu.Lock()
			reviews, settled = nil, nil
			mu.Unlock()

			event := cardOrderUpdated(idem.StateSucceeded, "pay_1", "evt_pay_1_settle_ok")
			cuts.mu.Lock()
			cuts.cutUpdate, cuts.refuseConfirm = tt.cut, tt.refuse
			cuts.mu.Unlock()
			if tt.refuse {
				_, err = c.Confirm(t.Context(), "", "k", event)
				require.ErrorIs(t, err, syscall.ECONNREFUSED, "Confirm(): the journal refused the confirmation")
				op, err := c.Lookup(t.Context(), "", "k")
				require.NoError(t, err)
				require.Equal(t, idem.StateUnknown, op.State, "journal after the refusal: State")
				require.Equal(t, tt.first, op.Review, "journal after the refusal: Review")
			}
			for i := range 2 { // the provider's redelivery changes nothing
				res, err = c.Confirm(t.Context(), "", "k", event)
				require.NoError(t, err, "Confirm() %d", i+1)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "pay_1", res.ResourceID)
				require.Equal(t, tt.want, res.Review, "Confirm() %d: Review", i+1)
			}

			op, err := c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State, "journal: State")
			require.Equal(t, tt.want, op.Review, "journal: Review")
			require.Equal(t, 2*tt.sends-1, op.Attempts, "journal: attempts, the charges and the status queries between them")
			op, err = c.Lookup(t.Context(), "", "k0")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k0 stays flagged")
			s.requireSeen(t, charges, tt.sends-1)

			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tt.wantHook, reviews, "Review hook calls")
			require.Equal(t, []string{"k " + tt.want}, settled, "Settle hook calls")
		})
	}
}
