package crashtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/journal"
)

// This file is the child's side: TestCrashChild runs the real client in a
// process the parent kills. It talks to the parent by printing lines:
//
//	opened                      the journal is open
//	resumed visited=N open=N    Resume returned (open: not settled by it)
//	begin KEY                   about to Submit KEY
//	ack KEY STATE               Submit returned with KEY journaled
//	conflict KEY                Submit said the key was used with another request (before its ack)
//	sent METHOD KEY SHA PATH    a request is handed to the transport (SHA of the body, "-" for a GET)
//	journaled KEY               point child: Create for KEY returned
//	committed KEY STATE         point child: the outcome of KEY was committed
//	crash POINT KEY             point child: about to SIGKILL itself
//	open N review N             resume child: what Resume could not settle
//	done                        the child finished its work
//	error ...                   something that must not happen; exit 2

// childWorkers is how many goroutines submit in a work child.
const childWorkers = 8

// The client's timings in the children. The fake server's slow faults last
// serverDelay, so a delayed response outlives the attempt timeout.
const (
	serverDelay    = time.Second
	attemptTimeout = 500 * time.Millisecond
	// resultLag is twice the fake server's query lag (serverDelay), as
	// idem.DefaultResultLag is twice the longest lag measured at
	// Binance: the default's two minutes of wall clock would leave every
	// order never placed unknown past the resume child's deadline.
	resultLag = 2 * serverDelay
)

// TestCrashChild is the body of a child process of TestCrashHarness; in a
// normal run it does nothing.
func TestCrashChild(t *testing.T) {
	mode := os.Getenv(envMode)
	if mode == "" {
		t.Skip("child process of TestCrashHarness")
	}
	ch := &childProc{journal: os.Getenv(envJournal), url: os.Getenv(envURL)}
	var err error
	if v := os.Getenv(envBehavior); v == idemtest.KeyIgnored().Name {
		ch.behavior = idemtest.KeyIgnored() // no preset of Behaviors
	} else if v != "" {
		if ch.behavior, err = idemtest.BehaviorNamed(v); err != nil {
			say("error %s: %v", envBehavior, err)
			os.Exit(2)
		}
	}
	if v := os.Getenv(envKeyWindow); v != "" {
		if ch.keyWindow, err = time.ParseDuration(v); err != nil {
			say("error %s: %v", envKeyWindow, err)
			os.Exit(2)
		}
	}
	switch mode {
	case "work":
		err = ch.work()
	case "resume":
		err = ch.resume()
	case "point":
		err = ch.point(os.Getenv(envPoint), os.Getenv(envKey))
	case "ignoring-save":
		err = ch.ignoringSave()
	case "ignoring-resume":
		err = ch.ignoringResume()
	case "ignoring-save-caller-gone":
		err = ch.ignoringSaveCallerGone()
	case "ignoring-save-outlived":
		err = ch.ignoringSaveOutlived()
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		say("error %v", err)
		os.Exit(2)
	}
	say("done")
}

type childProc struct {
	journal, url string
	// keyWindow is the server's key window as the client is told it; 0
	// leaves the client's default.
	keyWindow time.Duration
	// behavior is the server's, which may need options of its own (an
	// order API's key in the body).
	behavior idemtest.Behavior
}

// say prints one line to the parent in a single write, so that lines from
// several goroutines never interleave.
func say(format string, args ...any) {
	_, _ = os.Stdout.Write(fmt.Appendf(nil, format+"\n", args...))
}

// die SIGKILLs this process: the crash under test.
func die(point, key string) {
	say("crash %s %s", point, key)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// options are the client's options in every child.
// The retry budget is the default one: a run's length may hinge on how the
// bucket drained, but a harness with it off proved nothing about it.
func (ch *childProc) options(rt http.RoundTripper) []idem.Option {
	opts := []idem.Option{
		idem.WithHTTPClient(&http.Client{Transport: rt}),
		idem.WithResultEndpoint(ch.url + "/operations/{key}"),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", crashtest.Credential)
			return nil
		}),
		idem.WithAttemptTimeout(attemptTimeout),
		idem.WithBackoff(func() backoff.BackOff {
			return backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(20*time.Millisecond),
				backoff.WithMaxInterval(400*time.Millisecond),
				backoff.WithMaxElapsedTime(0))
		}),
		idem.WithMaxAttempts(8),
		idem.WithMaxElapsed(4 * time.Second),
		idem.WithRetryAfterCap(2 * time.Second),
		idem.WithResultLag(resultLag),
	}
	if ch.keyWindow > 0 {
		opts = append(opts, idem.WithKeyRetention(ch.keyWindow))
	}
	return append(opts, crashtest.BehaviorOptions(ch.behavior)...)
}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// work resumes the journal, then submits operations 0..n-1 from several
// goroutines, skipping those the journal holds as settled.
func (ch *childProc) work() error {
	ctx := context.Background()
	n, err := strconv.Atoi(os.Getenv(envOps))
	if err != nil {
		return fmt.Errorf("%s: %w", envOps, err)
	}
	resubmit := os.Getenv(envResubmit) != ""
	c, err := idem.Open(ch.journal, ch.options(&logTransport{base: newTransport()})...)
	if err != nil {
		return err
	}
	defer c.Close()
	say("opened")
	sum, err := c.Resume(ctx)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	say("resumed visited=%d open=%d", sum.Visited, sum.Processing+sum.Unknown+sum.Pending+sum.Review)
	if ch.behavior.KeyMember != "" && sum.Unknown > 0 {
		// This process cannot tell how wrong the crashed one's clock
		// read, so an order the endpoint does not find is resent only
		// once the result lag has passed since it began: Run's next
		// visit, which this one stands for.
		time.Sleep(resultLag)
		if sum, err = c.Resume(ctx); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		say("resumed visited=%d open=%d", sum.Visited, sum.Processing+sum.Unknown+sum.Pending+sum.Review)
	}

	var wg sync.WaitGroup
	errs := make(chan error, childWorkers)
	for g := range childWorkers {
		wg.Go(func() {
			for i := g; i < n; i += childWorkers {
				if err := ch.submit(ctx, c, i, resubmit); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// submit drives operation i, unless resubmit is false and the journal holds
// it as settled, and acknowledges it once Submit returns with it journaled.
func (ch *childProc) submit(ctx context.Context, c *idem.Client, i int, resubmit bool) error {
	key := crashtest.Key(i)
	if !resubmit {
		op, err := c.Lookup(ctx, idem.DefaultScope, key)
		switch {
		case err == nil && op.State.Terminal():
			return nil
		case err != nil && !errors.Is(err, idem.ErrNotFound):
			return fmt.Errorf("lookup %s: %w", key, err)
		}
	}
	say("begin %s", key)
	res, err := c.Submit(ctx, idem.Request{Key: key, URL: ch.url + crashtest.OrdersPath, Body: crashtest.Body(i)})
	var ierr *idem.Error
	switch {
	case res == nil:
		return fmt.Errorf("submit %s: no result: %v", key, err)
	case errors.Is(err, idem.ErrKeyConflict):
		// Right only if someone else used the key first: the parent
		// checks with the server.
		say("conflict %s", key)
	case err != nil && !errors.As(err, &ierr):
		return fmt.Errorf("submit %s: %w", key, err)
	}
	say("ack %s %s", key, res.State)
	return nil
}

// maxResumeRounds bounds the resume child.
const (
	maxResumeRounds = 30
	resumeDeadline  = 90 * time.Second
)

// resume runs Resume until nothing is open but operations flagged for
// review, within a bounded number of rounds and time.
func (ch *childProc) resume() error {
	ctx := context.Background()
	c, err := idem.Open(ch.journal, ch.options(&logTransport{base: newTransport()})...)
	if err != nil {
		return err
	}
	defer c.Close()
	say("opened")
	deadline := time.Now().Add(resumeDeadline)
	for round := 1; ; round++ {
		sum, err := c.Resume(ctx)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		say("resumed visited=%d open=%d", sum.Visited, sum.Processing+sum.Unknown+sum.Pending+sum.Review)
		open, err := c.List(ctx, idem.Filter{States: []idem.State{idem.StatePending, idem.StateProcessing, idem.StateUnknown}})
		if err != nil {
			return err
		}
		review := 0
		for _, op := range open {
			if op.Review != "" {
				review++
			}
		}
		if len(open) == review || round == maxResumeRounds || time.Now().After(deadline) {
			say("open %d review %d", len(open), review)
			return nil
		}
	}
}

// point crashes at one boundary of one operation's life (see
// TestCrashHarness) by wrapping the client's Store and RoundTripper: no
// client internals are touched.
func (ch *childProc) point(point, key string) error {
	i := keyIndex(key)
	if i < 0 {
		return fmt.Errorf("%s %q is not a workload key", envKey, key)
	}
	js, err := journal.Open(ch.journal)
	if err != nil {
		return err
	}
	store := &crashStore{Store: js, point: point, key: key}
	rt := &logTransport{base: newTransport(), point: point, key: key, store: store}
	c, err := idem.New(store, ch.options(rt)...)
	if err != nil {
		return err
	}
	defer store.Close()
	say("opened")
	res, err := c.Submit(context.Background(), idem.Request{Key: key, URL: ch.url + crashtest.OrdersPath, Body: crashtest.Body(i)})
	state := idem.State("none")
	if res != nil {
		state = res.State
	}
	return fmt.Errorf("point %s: Submit(%s) returned (%s, %v) instead of crashing", point, key, state, err)
}

// crashStore is the journal as the client sees it, with crash points.
type crashStore struct {
	*journal.Store
	point, key string
	journaled  atomic.Bool // Create for key returned
}

func (s *crashStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	stored, err := s.Store.Create(ctx, rec)
	s.created(rec, err)
	return stored, err
}

// CreateClaimed is the journal's (idem.CreateClaimer), which Submit calls
// instead of Create: it must mark the key journaled too.
func (s *crashStore) CreateClaimed(ctx context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error) {
	stored, l, err := s.Store.CreateClaimed(ctx, rec, owner, expires)
	s.created(rec, err)
	return stored, l, err
}

func (s *crashStore) created(rec *journal.Record, err error) {
	if err == nil && rec.Key == s.key {
		s.journaled.Store(true)
		say("journaled %s", rec.Key)
	}
}

func (s *crashStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	rec, err := s.Store.Update(ctx, scope, key, fn)
	if err == nil && key == s.key && rec.State.Terminal() {
		say("committed %s %s", key, rec.State)
		if s.point == "d" {
			// (d) The outcome is on disk; the caller never learns it.
			die("d", key)
		}
	}
	return rec, err
}

// bodyOf returns req's body, and the request to send: req, or for one
// sent once (no GetBody, so that net/http cannot resend it, as idem sends
// to an endpoint that ignores the key) a copy of it holding the bytes
// read, still without GetBody.
func bodyOf(req *http.Request) (*http.Request, []byte, error) {
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(body)
		return req, b, err
	}
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	once := req.Clone(req.Context())
	once.Body = io.NopCloser(bytes.NewReader(b))
	return once, b, nil
}

// logTransport tells the parent about every request it forwards, so the
// parent can check that each key always went out with the same bytes to the
// same URL, and crashes at the configured point.
type logTransport struct {
	base       http.RoundTripper
	point, key string
	store      *crashStore
}

func (t *logTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, sha := req.Header.Get("Idempotency-Key"), "-"
	if req.Method == http.MethodGet {
		key, _ = url.PathUnescape(strings.TrimPrefix(req.URL.EscapedPath(), "/operations/"))
	} else if req.Body != nil && req.Body != http.NoBody {
		var b []byte
		var err error
		if req, b, err = bodyOf(req); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		sha = hex.EncodeToString(sum[:])
		if key == "" {
			// An order API's key is the body's client order id.
			var v struct {
				ID string `json:"client_order_id"`
			}
			_ = json.Unmarshal(b, &v)
			key = v.ID
		}
	}
	mine := t.point != "" && key == t.key
	if mine && t.point == "a" && req.Method != http.MethodGet {
		// (a) The operation is journaled; nothing has reached the wire.
		if !t.store.journaled.Load() {
			say("error point a: a request for %s before its Create returned", key)
			os.Exit(2)
		}
		die("a", key)
	}
	say("sent %s %s %s %s", req.Method, key, sha, req.URL.Path)
	resp, err := t.base.RoundTrip(req)
	if !mine || err != nil {
		return resp, err
	}
	switch {
	case t.point == "b" && req.Method != http.MethodGet:
		// (b) The server answered; the outcome is not committed.
		die("b", key)
	case t.point == "c" && req.Method == http.MethodGet:
		// (c) The result query answered; its outcome is not committed.
		die("c", key)
	}
	return resp, err
}
