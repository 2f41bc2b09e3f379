package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// faultyStore fails the journal calls it is told to, until healed.
type faultyStore struct {
	idem.Store
	mu                sync.Mutex
	updateErr, prunes error
	updates           int // Update calls refused
	// due and get fail Due and Get calls. Run's passes on the test's
	// clock take no real time, so a switch made by the test itself lands
	// after an unknown number of them (enough, under load, for years of
	// clock): a countdown ends by itself.
	due, get countdown
}

// countdown is an error to fail calls with: every call while left is 0,
// or the next left calls and then none.
type countdown struct {
	err  error
	left int
}

// next returns the error for one more call.
func (c *countdown) next() error {
	err := c.err
	if c.left > 0 {
		if c.left--; c.left == 0 {
			c.err = nil
		}
	}
	return err
}

func (s *faultyStore) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	s.mu.Lock()
	err := s.get.next()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, scope, key)
}

// failDue makes the next n Due calls fail with err.
func (s *faultyStore) failDue(err error, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due = countdown{err, n}
}

func (s *faultyStore) set(update, due, prune error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateErr, s.due, s.prunes = update, countdown{err: due}, prune
}

func (s *faultyStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	s.mu.Lock()
	err := s.updateErr
	if err != nil {
		s.updates++
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Store.Update(ctx, scope, key, fn)
}

// ClaimDue is Run's read of the due operations.
func (s *faultyStore) ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]journal.Claimed, error) {
	s.mu.Lock()
	err := s.due.next()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Store.ClaimDue(ctx, owner, now, expires, limit)
}

func (s *faultyStore) Prune(ctx context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	err := s.prunes
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return s.Store.Prune(ctx, before)
}

// errNoSpace is what a write on a full disk returns.
var errNoSpace = fmt.Errorf("write /var/lib/app/idem.journal: %w", syscall.ENOSPC)

// logCapture keeps the log records a Client writes.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// find returns the attributes of the records with msg, in order, with
// their levels.
func (l *logCapture) find(msg string) (levels []slog.Level, attrs []map[string]slog.Value) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		m := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
		levels, attrs = append(levels, r.Level), append(attrs, m)
	}
	return levels, attrs
}

// runAsync starts Run and returns the channel its result arrives on.
func runAsync(ctx context.Context, c *idem.Client) <-chan error {
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	return ran
}

// waitHealth polls Health until ok holds, for at most a minute, and fails at
// once if Run (whose result arrives on ran) returns meanwhile.
func waitHealth(t *testing.T, c *idem.Client, ran <-chan error, what string, ok func(idem.Health) bool) idem.Health {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h := c.Health()
		if ok(h) {
			return h
		}
		select {
		case err := <-ran:
			t.Fatalf("%s: Run() returned %v; Health() = %+v", what, err, h)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after a minute; Health() = %+v", what, h)
		}
		time.Sleep(time.Millisecond) // polling interval, not a condition
	}
}

// Issue 10, item 2: one failed journal write (a full disk) ended Run for
// good, and operations stayed open until the process restarted. Run must
// back off, report the error, and settle everything once writes work.
func TestRunOutlivesJournalWriteErrors(t *testing.T) {
	logs := &logCapture{}
	settled := make(chan *idem.Result, 1)
	e := newEnv(t)
	_, err := e.client.Prepare(e.ctx, e.req("k", `{"amount":1}`))
	require.NoError(t, err)
	e.crashMidAttempt("k")     // maybe sent: every visit queries before it writes
	e.clock.Advance(time.Hour) // due
	fs := &faultyStore{Store: e.store}
	c, err := idem.New(fs, append(e.baseOpts(),
		idem.WithKeyRetention(idem.KeyRetentionStripe), // an hour later, still inside the key window
		idem.WithLogger(slog.New(logs)),
		idem.WithSettleFunc(func(r *idem.Result) { settled <- r }))...)
	require.NoError(t, err)
	require.Equal(t, idem.Health{}, c.Health(), "Health() before Run")
	fs.set(errNoSpace, nil, nil)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ran := runAsync(ctx, c)
	h := waitHealth(t, c, ran, "Run failing passes", func(h idem.Health) bool { return h.ConsecutiveErrors >= 7 })
	require.True(t, h.RunActive, "Health() = %+v", h)
	require.ErrorIs(t, h.LastJournalError, syscall.ENOSPC)
	require.False(t, h.LastJournalErrorAt.IsZero())
	require.True(t, h.RetryAt.After(h.LastJournalErrorAt), "RetryAt %v, error at %v", h.RetryAt, h.LastJournalErrorAt)
	require.True(t, h.LastPass.IsZero(), "no pass succeeded yet: %+v", h)
	select {
	case err := <-ran:
		t.Fatalf("Run() returned %v on a full disk; want it to keep going", err)
	default:
	}

	// Backoff on the injected clock, jittered and growing: a failing pass
	// is not retried at once. Run sleeps on nothing else while it fails.
	sleeps := e.clock.Sleeps()
	require.GreaterOrEqual(t, len(sleeps), 6)
	for i, d := range sleeps[:6] {
		base := time.Duration(1<<i) * time.Second
		require.Truef(t, d >= base/2 && d <= base*3/2, "wait %d after a failed pass = %v; want %v ±50%%", i+1, d, base)
	}
	// Each failed pass stops at its first failed write: one query each.
	queries := e.queries("k")
	h = c.Health()
	require.LessOrEqual(t, queries, h.ConsecutiveErrors+1, "queries sent by %d failed passes", h.ConsecutiveErrors)
	require.Empty(t, e.submits("k"), "a resend whose attempt cannot be journaled must not go")

	levels, attrs := logs.find("idem: reconciler: journal error, retrying")
	require.GreaterOrEqual(t, len(attrs), 6)
	require.Equal(t, slog.LevelWarn, levels[0])
	require.Equal(t, "visit", attrs[0]["phase"].String())
	require.Contains(t, attrs[0]["err"].String(), "no space left on device")
	require.Equal(t, int64(1), attrs[0]["consecutive_errors"].Int64())
	require.Equal(t, sleeps[0], attrs[0]["retry_in"].Duration())
	require.Equal(t, slog.LevelError, levels[5], "a journal that stays broken is logged at Error")

	fs.set(nil, nil, nil) // space freed
	r := within(t, settled, "Run settling once writes work")
	require.Equal(t, "k", r.Key)
	require.Equal(t, idem.StateSucceeded, r.State)
	h = waitHealth(t, c, ran, "a clean pass", func(h idem.Health) bool { return h.ConsecutiveErrors == 0 })
	require.True(t, h.RunActive)
	require.True(t, h.LastPass.After(h.LastJournalErrorAt), "Health() = %+v", h)
	require.ErrorIs(t, h.LastJournalError, syscall.ENOSPC, "the last error is kept after recovery")
	require.True(t, h.RetryAt.IsZero())
	// Run publishes the clean pass in Health just before it logs the
	// recovery: wait for the line, not only for Health.
	require.Eventually(t, func() bool {
		_, attrs = logs.find("idem: reconciler: journal recovered")
		return len(attrs) > 0
	}, 10*time.Second, time.Millisecond, "the recovery is logged")
	require.GreaterOrEqual(t, attrs[0]["consecutive_errors"].Int64(), int64(7))

	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
	h = c.Health()
	require.False(t, h.RunActive)
	require.ErrorIs(t, h.RunErr, context.Canceled)
	require.Equal(t, journal.StateSucceeded, e.record("k").State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.Len(t, e.submits("k"), 1, "one resend, once its attempt could be journaled")

	// Resume, a single pass at start-up, still reports the journal error
	// to its caller rather than a clean Summary.
	_, err = c.Prepare(e.ctx, e.req("k2", `{"amount":2}`))
	require.NoError(t, err)
	fs.set(errNoSpace, nil, nil)
	_, err = c.Resume(e.ctx)
	require.ErrorIs(t, err, syscall.ENOSPC, "Resume() on a journal that refuses every write")
}

// Run keeps going through a failing read of the due operations and a
// failing prune, and settles what is due despite a prune that keeps
// failing: pruning old records must never hold up settling open ones.
func TestRunOutlivesFailingDueAndPrune(t *testing.T) {
	settled := make(chan *idem.Result, 1)
	e := newEnv(t)
	fs := &faultyStore{Store: e.store}
	c, err := idem.New(fs, append(e.baseOpts(), idem.WithSettleFunc(func(r *idem.Result) { settled <- r }))...)
	require.NoError(t, err)
	errIO := fmt.Errorf("read journal: %w", syscall.EIO)
	fs.set(nil, nil, errNoSpace)
	fs.failDue(errIO, 3) // then reads work again; pruning still fails

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ran := runAsync(ctx, c)
	// Run first prunes an hour after it starts (its waits move the
	// clock); once that prune has failed, an operation comes due.
	waitHealth(t, c, ran, "the failing prune reported", func(h idem.Health) bool {
		return errors.Is(h.LastJournalError, syscall.ENOSPC)
	})
	_, err = c.Prepare(e.ctx, e.req("k", `{"amount":1}`))
	require.NoError(t, err)
	r := within(t, settled, "Run settling while Prune fails")
	require.Equal(t, idem.StateSucceeded, r.State)
	h := c.Health()
	require.True(t, h.RunActive)
	require.Positive(t, h.ConsecutiveErrors, "the prune still fails: %+v", h)
	require.ErrorIs(t, h.LastJournalError, syscall.ENOSPC)

	fs.set(nil, nil, nil)
	waitHealth(t, c, ran, "a clean pass", func(h idem.Health) bool { return h.ConsecutiveErrors == 0 && !h.LastPass.IsZero() })
	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// A journal Run can never use again ends it: retrying a damaged file or a
// closed journal would fail the same way for ever.
func TestRunStopsOnUnusableJournal(t *testing.T) {
	for _, sentinel := range []error{journal.ErrCorrupt, journal.ErrVersion, journal.ErrClosed, journal.ErrReadOnly, journal.ErrFileFailed} {
		for _, where := range []string{"update", "due"} {
			t.Run(strings.TrimPrefix(sentinel.Error(), "journal: ")+"/"+where, func(t *testing.T) {
				e := newEnv(t)
				_, err := e.client.Prepare(e.ctx, e.req("k", `{"amount":1}`))
				require.NoError(t, err)
				e.clock.Advance(time.Hour) // due
				fs := &faultyStore{Store: e.store}
				c, err := idem.New(fs, e.baseOpts()...)
				require.NoError(t, err)
				bad := fmt.Errorf("journal: page 7: %w", sentinel)
				if where == "update" {
					fs.set(bad, nil, nil)
				} else {
					fs.set(nil, bad, nil)
				}
				ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
				defer cancel()
				err = c.Run(ctx)
				require.ErrorIs(t, err, sentinel)
				require.False(t, errors.Is(err, context.DeadlineExceeded), "Run() = %v", err)
				h := c.Health()
				require.False(t, h.RunActive)
				require.ErrorIs(t, h.RunErr, sentinel)
				require.ErrorIs(t, h.LastJournalError, sentinel)
				require.Equal(t, 1, h.ConsecutiveErrors)
				require.Empty(t, e.clock.Sleeps(), "no backoff before stopping")
			})
		}
	}
}

// Close ends a Run that is backing off after journal errors, and Health
// says so.
func TestCloseStopsRunBackingOff(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Prepare(e.ctx, e.req("k", `{"amount":1}`))
	require.NoError(t, err)
	fs := &faultyStore{Store: e.store}
	c, err := idem.New(fs, e.baseOpts()...)
	require.NoError(t, err)
	fs.set(errNoSpace, nil, nil)
	ran := runAsync(e.ctx, c)
	waitHealth(t, c, ran, "failing passes", func(h idem.Health) bool { return h.ConsecutiveErrors >= 2 })
	require.NoError(t, c.Close())
	require.ErrorIs(t, within(t, ran, "Run after Close"), idem.ErrClosed)
	h := c.Health()
	require.False(t, h.RunActive)
	require.ErrorIs(t, h.RunErr, idem.ErrClosed)
	require.ErrorIs(t, h.LastJournalError, syscall.ENOSPC)
}

// A visit whose re-read of the operation fails gives up the claim its pass
// took: otherwise no reconciler could visit the operation until the claim
// expired.
func TestRunReleasesClaimWhenRereadFails(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Prepare(e.ctx, e.req("k", `{"amount":1}`))
	require.NoError(t, err)
	e.crashMidAttempt("k")     // maybe sent: due for the reconciler
	e.clock.Advance(time.Hour) // due
	fs := &faultyStore{Store: e.store, get: countdown{fmt.Errorf("read /var/lib/app/idem.journal: %w", syscall.EIO), 1}}
	settledAt := make(chan time.Time, 1)
	c, err := idem.New(fs, append(e.baseOpts(),
		idem.WithKeyRetention(idem.KeyRetentionStripe), // an hour later, still inside the key window
		idem.WithSettleFunc(func(*idem.Result) { settledAt <- e.clock.Now() }))...)
	require.NoError(t, err)
	start := e.clock.Now()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ran := runAsync(ctx, c)
	select {
	case at := <-settledAt:
		require.Less(t, at.Sub(start), idem.DefaultLeaseDuration, "clock time from the failed re-read to the settlement")
	case err := <-ran:
		t.Fatalf("Run() returned %v", err)
	case <-time.After(time.Minute):
		t.Fatal("not settled after a minute")
	}
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	require.NoError(t, c.Close())
}
