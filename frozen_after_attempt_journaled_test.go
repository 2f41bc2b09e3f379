package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// frozenAfterResendJournaled is replica a's view of a journal shared with
// replica b (pgjournal, or two Clients on one bbolt file): once the
// write journaling a's second attempt (the resend's, the write before
// its send) has committed, a's process is frozen (a VM paused for a live
// migration, kill -STOP, a host suspended) before it goes on to the send.
// frozen is what happens meanwhile.
type frozenAfterResendJournaled struct {
	*renewRefusedByJournal
	key    string
	frozen func()
	done   atomic.Bool
}

func (s *frozenAfterResendJournaled) Update(ctx context.Context, scope, key string, fn func(r *journal.Record) error) (*journal.Record, error) {
	rec, err := s.Store.Update(ctx, scope, key, fn)
	if err == nil && key == s.key {
		n := len(rec.Attempts)
		if n > 0 && rec.Attempts[n-1].Number == 2 && !rec.Attempts[n-1].Done && s.done.CompareAndSwap(false, true) {
			s.frozen()
		}
	}
	return rec, err
}

// keyIgnoringThrottledCharges is a charge endpoint that reads no
// idempotency key (modelled: an API without idempotency support, as
// Solidgate documents some of its endpoints, "Idempotency: ignored", and
// saying nothing of it in its answers): every POST it takes charges. Its
// first is refused 429 before anything runs, as a rate limit refuses
// (Stripe's and PayPal's 429s charge nothing). Its answers carry no mark
// of the key ignored.
type keyIgnoringThrottledCharges struct {
	srv *httptest.Server
	mu  sync.Mutex
	// posts: every POST; charges: the payment id of each one that charged.
	posts   int
	charges []string
}

func newKeyIgnoringThrottledCharges(t *testing.T, clock *idemtest.Clock) *keyIgnoringThrottledCharges {
	s := &keyIgnoringThrottledCharges{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		// The server's clock is the test's: its Date says so.
		w.Header().Set("Date", clock.Now().UTC().Format(http.TimeFormat))
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound) // a clock probe's HEAD: no charge
			return
		}
		s.mu.Lock()
		s.posts++
		first := s.posts == 1
		var id string
		if !first {
			id = fmt.Sprintf("ch_%d", len(s.charges)+1)
			s.charges = append(s.charges, id)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if first {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"type":"rate_limit","message":"too many requests"}}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%q,"status":"succeeded"}`, id)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *keyIgnoringThrottledCharges) charged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.charges...)
}

// Two replicas on one journal, default settings (lease, attempt timeout,
// budget). Replica a's Submit of payment k is throttled (429: nothing
// charged); after the wait a journals its resend (the attempt, under its
// lease) and its process is frozen for 60 s before the send, longer than
// the lease (the attempt timeout and the lease's margin: 40 s). Replica
// b, called for k meanwhile, finds a's lease expired and takes k over:
// a's journaled attempt may have been sent, and with no result endpoint
// the resend is the only question there is, so b resends and gets k
// charged (ch_1), settled succeeded. Then a wakes. Only the lease holder
// may send (the fencing-token argument, Kleppmann, "How to do
// distributed locking", 2016: a paused holder cannot tell that its lease
// ended, and only the token stops it): a's writes were fenced, but its
// send was not, and it went out on a lease b had taken, a second charge
// at an endpoint that reads no key ([ch_1, ch_2]), which nothing
// recorded. a now renews its lease by its token before the send, finds
// it taken, and sends nothing: one charge, k succeeded with b's ch_1,
// which a's caller is told.
func TestResendFrozenPastItsLeaseIsNotSentAfterAnotherReplicaTookItOver(t *testing.T) {
	f := newFrozenResend(t)
	res, err := f.takenOverByB(t, f.submit)
	f.chargedOnce(t, res, err, 3) // a's 429, a's resend journaled, b's resend
}

// As above, with no replica taking k over while a is frozen: its lease,
// ended by the clock, is still its own by the token, and renewed; a
// sends its resend, and k is charged once and settled.
func TestResendFrozenPastItsLeaseIsSentWhenNoReplicaTookItOver(t *testing.T) {
	f := newFrozenResend(t)
	res, err := f.submit(t, func() { f.clock.Advance(60 * time.Second) })
	f.chargedOnce(t, res, err, 2) // the 429, the resend
}

// frozenResend is a journal, a clock and the throttling charge endpoint
// that reads no key, for payment k.
type frozenResend struct {
	clock *idemtest.Clock
	srv   *keyIgnoringThrottledCharges
	js    *journal.Store
	// a is replica a's journal: js, its renewals failed once a.failing
	// is set.
	a *renewRefusedByJournal
}

func newFrozenResend(t *testing.T) *frozenResend {
	f := &frozenResend{clock: idemtest.NewClock(epoch)}
	f.srv = newKeyIgnoringThrottledCharges(t, f.clock)
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	f.js = js
	f.a = &renewRefusedByJournal{Store: js}
	return f
}

// opts are a replica's options, the defaults but for the endpoint's
// client, the test's clock and the replica's name.
func (f *frozenResend) opts(owner string) []idem.Option {
	return []idem.Option{idem.WithHTTPClient(f.srv.srv.Client()), idem.WithClock(f.clock),
		idem.WithLease(owner, idem.DefaultLeaseDuration)}
}

// submit is replica a's Submit of k, frozen while frozen runs once its
// resend is journaled.
func (f *frozenResend) submit(t *testing.T, frozen func()) (*idem.Result, error) {
	shared := &frozenAfterResendJournaled{renewRefusedByJournal: f.a, key: "k", frozen: frozen}
	res, err := f.submitOn(t, shared)
	require.True(t, shared.done.Load(), "a was frozen after journaling its resend")
	return res, err
}

// submitOn is replica a's Submit of k on its view of the journal.
func (f *frozenResend) submitOn(t *testing.T, shared idem.Store) (*idem.Result, error) {
	a, err := idem.New(shared, f.opts("replica-a")...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a.Submit(t.Context(), idem.Request{Key: "k", URL: f.srv.srv.URL + "/v1/charges", Body: []byte(`{"amount":100}`)})
}

// chargedOnce holds that k was charged once (ch_1), that the journal
// and a's caller (res, err) both say so, and that k has attempts
// attempts.
func (f *frozenResend) chargedOnce(t *testing.T, res *idem.Result, err error, attempts int) {
	require.Equal(t, []string{"ch_1"}, f.srv.charged(), "charges")
	rec, gerr := f.js.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, gerr)
	require.Equal(t, idem.StateSucceeded, rec.State, "k")
	require.NotNil(t, rec.Result)
	require.Equal(t, "ch_1", rec.Result.ResourceID, "k's payment")
	require.Empty(t, rec.Review, "k's review")
	require.Len(t, rec.Attempts, attempts, "k's attempts")
	require.NoError(t, err, "a's Submit")
	require.Equal(t, idem.StateSucceeded, res.State, "a's result")
	require.Equal(t, "ch_1", res.ResourceID, "a's payment")
}

// renewRefusedByJournal is a shared journal whose Renew fails, once
// failing is set, as a database's connection reset fails it (modelled:
// pgjournal's Renew is one UPDATE, and a dropped connection fails it
// with no word on the lease), the write after it taken as usual.
type renewRefusedByJournal struct {
	*journal.Store
	failing atomic.Bool
}

func (s *renewRefusedByJournal) Renew(ctx context.Context, l journal.Lease, expires time.Time) (journal.Lease, error) {
	if s.failing.CompareAndSwap(true, false) {
		return journal.Lease{}, fmt.Errorf("journal: renew %q: connection reset by peer", l.Key)
	}
	return s.Store.Renew(ctx, l, expires)
}

// As above, no replica taking k over, but the journal fails the renewal
// a's send waits on: nothing is sent (only the 429 reached the server),
// and the resend's attempt, journaled before the send, is closed as
// never sent, k still pending. Left open it read "may have been sent"
// (the process stopped mid-attempt): k unknown, and at an endpoint
// known to read no key its resend withheld for a person
// (ReviewKeyIgnored) where the old code sent once. b's Do sends it: one
// charge, settled.
func TestResendWhoseLeaseRenewalTheJournalFailsIsClosedAsNeverSent(t *testing.T) {
	f := newFrozenResend(t)
	_, err := f.submit(t, func() {
		f.clock.Advance(60 * time.Second)
		f.a.failing.Store(true)
	})
	f.closedNeverSent(t, err, 2) // the 429, the resend
}

// closedNeverSent holds that a's Submit of k, its lease's renewal
// failed by the journal, ended unknown (err) with nothing sent; that
// k's last attempt (of attempts), the one journaled for that send, is
// closed as never sent, k pending; and that b's Do then sends k: one
// charge, settled.
func (f *frozenResend) closedNeverSent(t *testing.T, err error, attempts int) {
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "a's Submit")
	require.False(t, f.a.failing.Load(), "the renewal was asked for")
	require.Empty(t, f.srv.charged(), "charges")
	rec, err := f.js.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StatePending, rec.State, "k")
	require.Len(t, rec.Attempts, attempts, "k's attempts")
	last := rec.Attempts[attempts-1]
	require.True(t, last.Done, "the attempt journaled for the send closed")
	require.False(t, last.Wrote, "the attempt journaled for the send read as sent")
	require.Contains(t, last.Err, "not sent", "the attempt journaled for the send")

	b := f.replicaB(t)
	op, err := b.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	res, err := b.Do(t.Context(), op)
	require.NoError(t, err, "b's Do")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, []string{"ch_1"}, f.srv.charged(), "charges")
}

// frozenAfterCreate is replica a's view of the shared journal, its
// process frozen once Submit has journaled k with its first attempt and
// taken its lease (CreateClaimed), before that attempt is sent.
type frozenAfterCreate struct {
	*renewRefusedByJournal
	frozen func()
	done   atomic.Bool
}

func (s *frozenAfterCreate) CreateClaimed(ctx context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error) {
	got, l, err := s.Store.CreateClaimed(ctx, rec, owner, expires)
	if err == nil && s.done.CompareAndSwap(false, true) {
		s.frozen()
	}
	return got, l, err
}

// The first send frozen the same way: a journals k with its first
// attempt and is frozen 60 s before sending it; b takes k over (its
// resend throttled, then charged: ch_1) and settles it. a wakes and
// sends nothing: one charge. Its caller is told b's outcome, succeeded
// ch_1, as after a frozen resend, not a lost lease's unknown outcome
// (state pending, 1 attempt) for a payment made.
func TestFirstSendFrozenPastItsLeaseIsNotSentAfterAnotherReplicaTookItOver(t *testing.T) {
	f := newFrozenResend(t)
	res, err := f.takenOverByB(t, f.submitFrozenAtCreate)
	f.chargedOnce(t, res, err, 3) // a's, closed by b as maybe sent; b's 429; b's resend
}

// The first send frozen past its lease, no replica taking k over, the
// journal failing the renewal: nothing sent, Submit's attempt closed as
// never sent, as a resend's is.
func TestFirstSendWhoseLeaseRenewalTheJournalFailsIsClosedAsNeverSent(t *testing.T) {
	f := newFrozenResend(t)
	_, err := f.submitFrozenAtCreate(t, func() {
		f.clock.Advance(60 * time.Second)
		f.a.failing.Store(true)
	})
	f.closedNeverSent(t, err, 1)
}

// submitFrozenAtCreate is replica a's Submit of k, frozen while frozen
// runs once k is journaled with its first attempt.
func (f *frozenResend) submitFrozenAtCreate(t *testing.T, frozen func()) (*idem.Result, error) {
	shared := &frozenAfterCreate{renewRefusedByJournal: f.a, frozen: frozen}
	res, err := f.submitOn(t, shared)
	require.True(t, shared.done.Load(), "a was frozen after journaling k")
	return res, err
}

// replicaB is replica b, on a's journal: its renewals never fail.
func (f *frozenResend) replicaB(t *testing.T) *idem.Client {
	b, err := idem.New(&struct{ *journal.Store }{f.js}, f.opts("replica-b")...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// takenOverByB is a's Submit of k by submit (f.submit,
// f.submitFrozenAtCreate), replica b taking k over and settling it while
// a is frozen, 60 s on.
func (f *frozenResend) takenOverByB(t *testing.T, submit func(*testing.T, func()) (*idem.Result, error)) (*idem.Result, error) {
	b := f.replicaB(t)
	var bRes *idem.Result
	var bErr error
	res, err := submit(t, func() {
		f.clock.Advance(60 * time.Second)
		op, err := b.Lookup(context.Background(), "", "k")
		if err != nil {
			bErr = err
			return
		}
		bRes, bErr = b.Do(context.Background(), op)
	})
	require.NoError(t, bErr, "b's Do")
	require.Equal(t, idem.StateSucceeded, bRes.State, "b's result")
	return res, err
}
