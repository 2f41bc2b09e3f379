package idem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// env is one client, its journal and a fake server sharing a manual clock.
type env struct {
	t       testing.TB
	srv     *idemtest.Server
	clock   *idemtest.Clock
	store   *journal.Store
	path    string
	client  *idem.Client
	ctx     context.Context
	opts    []idem.Option
	srvOpts []idemtest.Option
	script  *scriptTransport
	// noResult leaves out the result endpoint: reconcile by replay.
	noResult bool
}

type envOption func(*env)

func clientOpts(opts ...idem.Option) envOption {
	return func(e *env) { e.opts = append(e.opts, opts...) }
}

// script routes the client's submits through st.
func script(steps ...step) envOption {
	return func(e *env) { e.script = &scriptTransport{script: steps} }
}

// noResultEndpoint makes a client for an API without a result endpoint.
func noResultEndpoint() envOption { return func(e *env) { e.noResult = true } }

func serverOpts(opts ...idemtest.Option) envOption {
	return func(e *env) { e.srvOpts = append(e.srvOpts, opts...) }
}

// newEnv starts a fake server and a client with a result endpoint, both on
// a manual clock, so that waits cost nothing and every wait is recorded.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, clock: idemtest.NewClock(epoch), ctx: context.Background()}
	for _, o := range opts {
		o(e)
	}
	srv, err := idemtest.NewServer(append([]idemtest.Option{idemtest.WithClock(e.clock.Now)}, e.srvOpts...)...)
	require.NoError(t, err)
	e.srv = srv
	t.Cleanup(e.srv.Close)
	e.path = filepath.Join(t.TempDir(), "idem.journal")
	e.open()
	return e
}

func (e *env) baseOpts() []idem.Option {
	hc := e.srv.Client()
	if e.script != nil {
		e.script.base = hc.Transport
		hc = &http.Client{Transport: e.script}
	}
	opts := []idem.Option{
		idem.WithHTTPClient(hc),
		idem.WithClock(e.clock),
		idem.WithAttemptTimeout(2 * time.Second),
		// A constant wait keeps attempt counts exact; the jitter has its own test.
		idem.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Second) }),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer sk_test_PLANTED_SECRET")
			return nil
		}),
	}
	if !e.noResult {
		opts = append(opts, idem.WithResultEndpoint(e.srv.URL+"/operations/{key}"))
	}
	return append(opts, e.opts...)
}

// open (re)opens the journal and the client, as a restarted process would.
func (e *env) open() {
	e.t.Helper()
	store, err := journal.Open(e.path)
	require.NoError(e.t, err)
	c, err := idem.New(store, e.baseOpts()...)
	require.NoError(e.t, err)
	e.store, e.client = store, c
	e.t.Cleanup(func() { _ = store.Close() })
}

// replica is e.store under a pointer of its own, for another process's
// or replica's Client on the same journal: New refuses a second Client
// on one Store. Embedding keeps every optional interface idem asks a
// Store for (KeyIgnoringStore, KeyIgnoringRemover, StatsStore,
// CreateClaimer).
func (e *env) replica() idem.Store {
	return &struct{ *journal.Store }{e.store}
}

// restart closes the journal and opens it again.
func (e *env) restart() {
	e.t.Helper()
	require.NoError(e.t, e.client.Close())
	require.NoError(e.t, e.store.Close())
	e.open()
}

func (e *env) req(key, body string) idem.Request {
	return idem.Request{Key: key, URL: e.srv.URL + "/orders", Body: []byte(body)}
}

func (e *env) record(key string) *journal.Record {
	e.t.Helper()
	rec, err := e.store.Get(e.ctx, idem.DefaultScope, key)
	require.NoError(e.t, err)
	return rec
}

// scope is the fake server's scope for our client: the planted credential.
const scope = "Bearer sk_test_PLANTED_SECRET"

// submits returns the server's log of submits for key, in order.
func (e *env) submits(key string) []idemtest.Request {
	var out []idemtest.Request
	for _, r := range e.srv.Requests() {
		if r.Method != http.MethodGet && r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

// queries counts the result queries the server saw for key.
func (e *env) queries(key string) int {
	n := 0
	for _, r := range e.srv.Requests() {
		if r.Method == http.MethodGet && r.Path == "/operations/"+key {
			n++
		}
	}
	return n
}

// requireSameBytes asserts that every submit for key carried the key and
// the journaled body, byte for byte.
func (e *env) requireSameBytes(key string) {
	e.t.Helper()
	rec := e.record(key)
	for i, r := range e.submits(key) {
		require.Equalf(e.t, key, r.Key, "submit %d key", i+1)
		require.Equalf(e.t, rec.BodySHA, r.BodySHA256, "submit %d body digest", i+1)
		require.Equalf(e.t, "/orders", r.Path, "submit %d path", i+1)
	}
}

// settleByRestarts stops the server's faults, then restarts the client and
// resumes until nothing is left open, within a bounded number of rounds.
func (e *env) settleByRestarts() {
	e.t.Helper()
	require.NoError(e.t, e.srv.SetProfile(idemtest.Profile{}))
	for round := 0; round < 5; round++ {
		e.restart()
		sum, err := e.client.Resume(e.ctx)
		require.NoError(e.t, err)
		if sum.Visited == 0 {
			return
		}
		e.clock.Advance(time.Minute)
	}
}

// clientFor is a client with the default settings for srv, another
// vendor's server modelled by a test: its result endpoint, if any, and
// clock are the only options besides opts.
func clientFor(t testing.TB, srv *httptest.Server, clock *idemtest.Clock, opts ...idem.Option) *idem.Client {
	t.Helper()
	return journaledClient(t, append([]idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithClock(clock)}, opts...)...)
}

// journaledClient is a Client with opts on a new journal, both closed
// when the test ends.
func journaledClient(t testing.TB, opts ...idem.Option) *idem.Client {
	t.Helper()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// shape is one answer of a vendor's server, in its documented form.
type shape struct {
	status int
	header http.Header
	body   string
}

// vendor answers each submit with the next of its shapes, the last one
// again once they run out, and keeps the headers of each submit.
type vendor struct {
	srv    *httptest.Server
	mu     sync.Mutex
	shapes []shape
	n      int
	seen   []http.Header
	bodies []string
}

func newVendor(t testing.TB, shapes ...shape) *vendor {
	t.Helper()
	v := &vendor{shapes: shapes}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		s := v.shapes[min(v.n, len(v.shapes)-1)]
		v.n++
		v.seen = append(v.seen, r.Header.Clone())
		v.bodies = append(v.bodies, string(body))
		v.mu.Unlock()
		for name, vals := range s.header {
			w.Header()[name] = vals
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.status)
		_, _ = io.WriteString(w, s.body)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// posts counts the submits the vendor answered.
func (v *vendor) posts() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

// requireKeys asserts that the vendor answered n submits, each carrying
// key in the header name.
func (v *vendor) requireKeys(t testing.TB, name, key string, n int) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	require.Len(t, v.seen, n, "submits")
	for i, h := range v.seen {
		require.Equalf(t, key, h.Get(name), "submit %d: %s", i+1, name)
	}
}

// requireBodies asserts that the vendor answered n submits, each with
// body, for a key that goes in the body (WithKeyInBody).
func (v *vendor) requireBodies(t testing.TB, body string, n int) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	require.Len(t, v.bodies, n, "submits")
	for i, b := range v.bodies {
		require.Equalf(t, body, b, "submit %d: body", i+1)
	}
}

// requireForeignKey asserts that a call ended as one whose key another
// request used: flagged for a person, open, and with none of that
// request's outcome taken for ours.
func requireForeignKey(t testing.TB, res *idem.Result, err error) {
	t.Helper()
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "journaled and open: for a person")
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Empty(t, res.ResourceID, "another request's resource taken for ours")
	require.Equal(t, idem.ReviewKeyInUse, res.Review)
}

// requireOtherRequestsOp asserts that op, the operation of key on c, is
// left for a person as another request's (unknown, ReviewKeyInUse),
// nothing of that request taken for ours, its last attempt naming what
// differs, names.
func requireOtherRequestsOp(t testing.TB, c *idem.Client, op *idem.Operation, key, names string) {
	t.Helper()
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyInUse, op.Review)
	require.Empty(t, resourceOf(op), "another request's resource taken for ours")
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Contains(t, rec.Attempts[len(rec.Attempts)-1].Err, names)
}

// requireOutcome asserts that a call ended in state with resource id
// and review, its error matching each of kinds (nil: no error), and
// that no state but failed came with ErrFailed.
func requireOutcome(t testing.TB, res *idem.Result, err error, state idem.State, kinds []error, id, review string) {
	t.Helper()
	if kinds == nil {
		require.NoError(t, err)
	}
	for _, k := range kinds {
		require.ErrorIs(t, err, k)
	}
	if !errors.Is(err, idem.ErrFailed) {
		require.NotEqual(t, idem.StateFailed, res.State)
	}
	require.Equal(t, state, res.State)
	require.Equal(t, id, res.ResourceID)
	require.Equal(t, review, res.Review)
}

// requireRefusedAfterSend asserts that a call whose first send executed,
// then refused on its resends, ended for a person and never failed: the
// result and the journaled operation "key" unknown, flagged
// ReviewRefusedAfterSend. made names what executed, for the message.
func requireRefusedAfterSend(t testing.TB, c *idem.Client, res *idem.Result, err error, key, made string) {
	t.Helper()
	require.NotErrorIs(t, err, idem.ErrFailed, "the "+made+" read as failed")
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.StateUnknown, res.State)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)
}

// requireDoSendsNothing asserts that an explicit Do of operation "k"
// returns an error matching kind and sends the vendor no request: it
// still has answered n submits, each with key "k" in header.
func requireDoSendsNothing(t testing.TB, c *idem.Client, v *vendor, kind error, header string, n int) {
	t.Helper()
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	_, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, kind)
	v.requireKeys(t, header, "k", n)
}

// submit sends one payment through a client with the default settings.
func (v *vendor) submit(t testing.TB, opts ...idem.Option) (*idem.Result, error) {
	t.Helper()
	c := clientFor(t, v.srv, idemtest.NewClock(epoch), opts...)
	return c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
}

// childOutput runs this binary's test name in a child process, with
// envVar set in its environment, and returns its output once it passed:
// for what would kill the test binary (a panic on another goroutine) or
// must not be set in it (a file-size limit).
func childOutput(t *testing.T, name, envVar string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v", "-test.timeout=90s")
	cmd.Env = append(os.Environ(), envVar+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+name, "child:\n%s", out)
	return string(out)
}
