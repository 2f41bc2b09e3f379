package pgjournal_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/pgjournal"
)

// settleCalls counts, per key, the settle hook's and the settle func's
// calls: how the application learns of an outcome nobody waited for.
type settleCalls struct {
	mu       sync.Mutex
	hook, fn map[string]int
}

func newSettleCalls() *settleCalls {
	return &settleCalls{hook: map[string]int{}, fn: map[string]int{}}
}

func (s *settleCalls) options() []idem.Option {
	return []idem.Option{
		idem.WithHooks(idem.Hooks{Settle: func(_ context.Context, r *idem.Result) { s.add(s.hook, r.Key) }}),
		idem.WithSettleFunc(func(r *idem.Result) { s.add(s.fn, r.Key) }),
	}
}

func (s *settleCalls) add(m map[string]int, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m[key]++
}

func (s *settleCalls) counts(key string) (hook, fn int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hook[key], s.fn[key]
}

// slowPayment returns a fake server and a client on s, sharing a manual
// clock, where payment "k" was still processing when Submit's budget ran
// out: open, its outcome left to the provider's event.
func slowPayment(t *testing.T, s *pgjournal.Store) (*idemtest.Server, *idem.Client, *settleCalls) {
	t.Helper()
	clock := idemtest.NewClock(time.Now().UTC())
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	calls := newSettleCalls()
	c := newClient(t, s, srv, append(calls.options(), idem.WithClock(clock))...)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
	_, err = c.Submit(context.Background(), order(srv, "k"))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() of a slow payment")
	return srv, c, calls
}

// requireConfirmedOnce checks that "k" is settled by one confirmation,
// and that the application was told once.
func requireConfirmedOnce(t *testing.T, c *idem.Client, calls *settleCalls) {
	t.Helper()
	op, err := c.Lookup(context.Background(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State, "journaled state")
	require.Len(t, op.Confirmations, 1, "confirmations journaled")
	hook, fn := calls.counts("k")
	require.Equal(t, 1, hook, "settle hook calls")
	require.Equal(t, 1, fn, "settle func calls")
}

// TestConfirmCommitAnswerLost: a webhook's Confirm whose COMMIT reached
// PostgreSQL but whose answer was lost (the connection, or a pooler's to
// the server, broke: journal.ErrMaybeCommitted). The handler answers the
// provider with an error and the provider delivers the event again (Stripe
// retries for up to three days, Adyen until it gets "[accepted]"). Whatever
// the cut, the application learns of the settlement exactly once (the
// settle hook and the settle func), and nothing more is sent. It learned
// nothing when the first delivery committed: the redelivery found the
// event recorded and changed nothing, so nobody was ever told the order
// was paid.
func TestConfirmCommitAnswerLost(t *testing.T) {
	for _, at := range []cut{afterCommit, beforeCommit} {
		t.Run(cutNames[at], func(t *testing.T) {
			ctx := context.Background()
			s, cutter := openCutStore(t)
			srv, c, calls := slowPayment(t, s)
			sent := len(requestsFor(srv, "k"))

			event := idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_000001", Source: "provider-webhook", EventID: "evt_cut", Reason: "order.succeeded"}
			cutter.arm("evt_cut", at)
			res, err := c.Confirm(ctx, "", "k", event)
			committed := cutter.wait(t)
			require.Equal(t, at == afterCommit, committed, "committed")
			if err != nil {
				// The handler answers 5xx; the provider delivers the
				// event again.
				res, err = c.Confirm(ctx, "", "k", event)
			}
			require.NoError(t, err, "Confirm() (delivered again after an error)")
			require.Equal(t, idem.StateSucceeded, res.State)

			requireConfirmedOnce(t, c, calls)
			_, err = c.Resume(ctx)
			require.NoError(t, err)
			require.Equal(t, sent, len(requestsFor(srv, "k")), "requests after the confirmation")
		})
	}
}

// hangup, while armed, ends a context when the COMMIT of the transaction
// that holds marker has gone to the server, whose answer then takes
// answerDelay to come back (a slow fsync, a synchronous standby): a
// client that gives up waiting first (pgx sets a deadline on the
// connection when the context of its query ends) learns nothing, though
// the server committed.
type hangup struct {
	marker []byte
	armed  atomic.Bool
	cancel context.CancelFunc
}

const answerDelay = 200 * time.Millisecond

type hangupConn struct {
	net.Conn
	h        *hangup
	inTx     bool          // the transaction holds the marker
	waiting  bool          // its COMMIT went: the answer is held back
	deadline chan struct{} // closed when the client gives up
	once     sync.Once
}

func (c *hangupConn) Write(b []byte) (int, error) {
	if c.h.armed.Load() && bytes.Contains(b, c.h.marker) {
		c.inTx = true
	}
	if c.inTx && bytes.Contains(b, commitMsg) {
		c.inTx, c.waiting = false, true
		n, err := c.Conn.Write(b)
		c.h.cancel()
		return n, err
	}
	return c.Conn.Write(b)
}

func (c *hangupConn) Read(p []byte) (int, error) {
	if c.waiting {
		select {
		case <-c.deadline:
			return 0, os.ErrDeadlineExceeded
		case <-time.After(answerDelay):
			c.waiting = false
		}
	}
	return c.Conn.Read(p)
}

func (c *hangupConn) SetDeadline(t time.Time) error {
	if c.waiting && !t.IsZero() {
		c.once.Do(func() { close(c.deadline) })
	}
	return c.Conn.SetDeadline(t)
}

// TestConfirmProviderHangsUp: the provider stops waiting for the webhook
// handler (Adyen gives an endpoint 10 s, Stripe and PayPal not much more;
// a busy journal, a row lock held up to 5 s), and net/http ends the
// request's context, which the handler passed to Confirm, while its
// COMMIT was on the wire. The confirmation committed; the provider
// delivers the event again, which finds it recorded. The application
// must have been told of the settlement once: Confirm's write ended with
// the handler's context, its fate unknown, and its read back too, so
// nobody ever was.
func TestConfirmProviderHangsUp(t *testing.T) {
	ctx := context.Background()
	h := &hangup{marker: []byte("evt_hangup")}
	h.armed.Store(true)
	s := openStoreWrapping(t, func(conn net.Conn) net.Conn {
		return &hangupConn{Conn: conn, h: h, deadline: make(chan struct{})}
	})
	_, c, calls := slowPayment(t, s)

	event := idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_000001", Source: "provider-webhook", EventID: "evt_hangup", Reason: "order.succeeded"}
	handlerCtx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	_, _ = c.Confirm(handlerCtx, "", "k", event) // nobody reads the answer
	h.armed.Store(false)
	res, err := c.Confirm(ctx, "", "k", event)
	require.NoError(t, err, "Confirm() of the redelivered event")
	require.Equal(t, idem.StateSucceeded, res.State)

	requireConfirmedOnce(t, c, calls)
}
