package idem_test

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestOutcomeTable drives one operation through each row of the outcome
// table (DESIGN.md) and asserts the final state, the requests the server
// saw, and the side effects it performed.
func TestOutcomeTable(t *testing.T) {
	gw502 := step{forward: true, status: http.StatusBadGateway}
	tests := []struct {
		name      string
		fault     *idemtest.Fault
		steps     []step
		opts      []idem.Option
		want      idem.State
		wantErr   error
		submits   int // POSTs the server saw
		queries   int
		effects   int
		wantSleep bool
	}{
		{name: "2xx decodes", want: idem.StateSucceeded, submits: 1, effects: 1},
		{name: "2xx garbage body is ambiguous: query", fault: &idemtest.Fault{Kind: idemtest.GarbageBody},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1},
		{name: "2xx truncated body is ambiguous: query", fault: &idemtest.Fault{Kind: idemtest.TruncatedBody},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1},
		// Nothing of ours can have executed: the request in flight is
		// someone else's, and a query would read its result.
		{name: "409 before anything of ours executed: wait, resend, never query", steps: []step{{status: http.StatusConflict, header: http.Header{"Retry-After": {"2"}}}},
			want: idem.StateSucceeded, submits: 1, effects: 1, wantSleep: true},
		{name: "429 throttled: wait, resend", fault: &idemtest.Fault{Kind: idemtest.Throttle, RetryAfter: 3 * time.Second},
			want: idem.StateSucceeded, submits: 2, effects: 1, wantSleep: true},
		{name: "503 unavailable: wait, resend", fault: &idemtest.Fault{Kind: idemtest.Unavailable, RetryAfter: time.Second, HTTPDate: true},
			want: idem.StateSucceeded, submits: 2, effects: 1, wantSleep: true},
		{name: "500 after commit: query finds it", fault: &idemtest.Fault{Kind: idemtest.ErrorAfterCommit},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1},
		{name: "500 before commit: query 404, wait, resend same key", fault: &idemtest.Fault{Kind: idemtest.ErrorBeforeCommit},
			want: idem.StateSucceeded, submits: 2, queries: 1, effects: 1, wantSleep: true},
		{name: "502 from a gateway after commit", steps: []step{gw502},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1},
		{name: "504 before the server saw it: query 404, wait, resend", steps: []step{{status: http.StatusGatewayTimeout}},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1, wantSleep: true},
		{name: "408 request timeout: query 404, wait, resend", steps: []step{{status: http.StatusRequestTimeout}},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1, wantSleep: true},
		{name: "402 declined is failed", fault: &idemtest.Fault{Kind: idemtest.Decline},
			want: idem.StateFailed, wantErr: idem.ErrFailed, submits: 1},
		{name: "other 4xx rejected", steps: []step{{status: http.StatusForbidden}},
			want: idem.StateFailed, wantErr: idem.ErrFailed},
		{name: "dial refused: never sent, resend", steps: []step{{err: dialRefused}, {err: dialRefused}},
			want: idem.StateSucceeded, submits: 1, effects: 1, wantSleep: true},
		{name: "timeout after commit: query", fault: &idemtest.Fault{Kind: idemtest.DelayResponse, Delay: time.Minute},
			opts: []idem.Option{idem.WithAttemptTimeout(100 * time.Millisecond)},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1},
		{name: "2xx body over the read cap proves nothing: query",
			steps: []step{{forward: true, status: http.StatusCreated,
				body: `{"state":"succeeded","resourceId":"ord_000001","padding":"` + strings.Repeat("x", 4096) + `"}`}},
			opts: []idem.Option{idem.WithMaxResponseBytes(1024)},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1},
		{name: "connection dropped after commit: query", fault: &idemtest.Fault{Kind: idemtest.DropAfterCommit},
			want: idem.StateSucceeded, submits: 1, queries: 1, effects: 1},
		{name: "result endpoint lags: 404 is not never-happened", fault: &idemtest.Fault{Kind: idemtest.QueryLag, Delay: time.Hour},
			steps: []step{gw502}, want: idem.StateSucceeded, submits: 2, queries: 1, effects: 1, wantSleep: true},
		{name: "slow processing: processing, then query", fault: &idemtest.Fault{Kind: idemtest.SlowProcessing, Delay: 5 * time.Second},
			want: idem.StateSucceeded, submits: 1, queries: 3, effects: 1, wantSleep: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []envOption{clientOpts(tt.opts...)}
			if tt.steps != nil {
				opts = append(opts, script(tt.steps...))
			}
			e := newEnv(t, opts...)
			const key = "order-1"
			if tt.fault != nil {
				f := *tt.fault
				f.Key = key
				require.NoError(t, e.srv.Inject(f))
			}
			res, err := e.client.Submit(e.ctx, e.req(key, `{"amount":100}`))
			require.NotNil(t, res)
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.wantErr)
			}
			require.Equal(t, tt.want, res.State, "Submit() state")
			require.Equal(t, tt.want, e.record(key).State, "journaled state")

			require.Len(t, e.submits(key), tt.submits, "submits the server saw")
			require.Equal(t, tt.queries, e.queries(key), "result queries")
			require.Equal(t, tt.effects, e.srv.Effects(scope, key), "side effects")
			e.requireSameBytes(key)
			if tt.want == idem.StateSucceeded {
				require.NotEmpty(t, res.ResourceID)
			}
			require.Equal(t, tt.wantSleep, len(e.clock.Sleeps()) > 0, "waited: %v", e.clock.Sleeps())

			// Terminal is final: asking again sends nothing.
			before := len(e.srv.Requests())
			op, err := e.client.Lookup(e.ctx, idem.DefaultScope, key)
			require.NoError(t, err)
			again, _ := e.client.Do(e.ctx, op)
			require.Equal(t, res.State, again.State)
			require.Len(t, e.srv.Requests(), before, "requests after settling")
		})
	}
}

func TestKeyConflictOnServerIsNeverResent(t *testing.T) {
	e := newEnv(t)
	// Another client used the key with another body first.
	other, err := idem.New(e.replica(), idem.WithHTTPClient(e.srv.Client()), idem.WithScope("elsewhere"),
		idem.WithRequestHook(func(r *http.Request) error { r.Header.Set("Authorization", scope); return nil }))
	require.NoError(t, err)
	_, err = other.Submit(e.ctx, idem.Request{Key: "k1", URL: e.srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)

	res, err := e.client.Submit(e.ctx, e.req("k1", `{"amount":2}`))
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.StateFailed, res.State)
	require.Len(t, e.submits("k1"), 2, "one submit each, no resend after 422")
	require.Equal(t, 1, e.srv.Effects(scope, "k1"))
}

func TestPrepareSameKey(t *testing.T) {
	e := newEnv(t)
	op, err := e.client.Prepare(e.ctx, e.req("k", `{"a":1}`))
	require.NoError(t, err)
	require.Equal(t, idem.StatePending, op.State)
	require.Empty(t, e.srv.Requests(), "Prepare sends nothing")

	again, err := e.client.Prepare(e.ctx, e.req("k", `{"a":1}`))
	require.NoError(t, err)
	require.Equal(t, op.Created, again.Created, "the journaled operation comes back")

	_, err = e.client.Prepare(e.ctx, e.req("k", `{"a":2}`))
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	other := e.req("k", `{"a":1}`)
	other.Header = http.Header{"Stripe-Account": {"acct_2"}}
	_, err = e.client.Prepare(e.ctx, other)
	require.ErrorIs(t, err, idem.ErrKeyConflict, "same body, different headers: another request")
	_, err = e.client.Submit(e.ctx, e.req("k", `{"a":2}`))
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.Empty(t, e.srv.Requests(), "a conflicting body is never sent")

	res, err := e.client.Do(e.ctx, op)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

func TestRandomKeyAndQuotedHeader(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithKeyHeader("X-Idempotency-Key", idem.KeyQuoted)),
		serverOpts(idemtest.WithKeyHeader("X-Idempotency-Key")))
	res, err := e.client.Submit(e.ctx, idem.Request{URL: e.srv.URL + "/orders", Body: []byte(`{}`)})
	require.NoError(t, err)
	require.Len(t, res.Key, 36, "a UUID key")
	reqs := e.srv.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, res.Key, reqs[0].Key)
	require.Equal(t, `"`+res.Key+`"`, reqs[0].RawKey, "RFC 8941 string")
}

func TestCredentialsNeverJournaled(t *testing.T) {
	e := newEnv(t)
	for _, h := range []string{"Authorization", "cookie", "Proxy-Authorization", "x-api-key"} {
		r := e.req("k-"+h, `{}`)
		r.Header = http.Header{h: {"secret"}}
		_, err := e.client.Prepare(e.ctx, r)
		require.ErrorIs(t, err, idem.ErrSecretHeader, h)
		require.ErrorContains(t, err, "WithRequestHook")
	}
	r := e.req("k-url", `{}`)
	r.URL = "http://user:pw@" + e.srv.URL[len("http://"):] + "/orders"
	_, err := e.client.Prepare(e.ctx, r)
	require.ErrorIs(t, err, idem.ErrSecretHeader)

	// The hook adds the credential at send time; the server saw it (it is
	// the scope) but the journal file never holds it.
	_, err = e.client.Submit(e.ctx, e.req("k", `{"amount":1}`))
	require.NoError(t, err)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.NoError(t, e.store.Close())
	raw, err := os.ReadFile(e.path)
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte("PLANTED_SECRET")), "journal holds the credential")
	fi, err := os.Stat(e.path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestInvalidRequests(t *testing.T) {
	e := newEnv(t)
	tests := map[string]idem.Request{
		"relative URL":    {Key: "k", URL: "/orders"},
		"ftp URL":         {Key: "k", URL: "ftp://127.0.0.1/x"},
		"key with space":  {Key: "a b", URL: e.srv.URL},
		"long key":        {Key: string(bytes.Repeat([]byte("k"), 300)), URL: e.srv.URL},
		"lower method":    {Key: "k", URL: e.srv.URL, Method: "post"},
		"huge body":       {Key: "k", URL: e.srv.URL, Body: make([]byte, idem.MaxBodyBytes+1)},
		"key header set":  {Key: "k", URL: e.srv.URL, Header: http.Header{"Idempotency-Key": {"x"}}},
		"CRLF in header":  {Key: "k", URL: e.srv.URL, Header: http.Header{"X-Note": {"a\r\nX-Evil: 1"}}},
		"bad header name": {Key: "k", URL: e.srv.URL, Header: http.Header{"X Note": {"a"}}},
		"dot key":         {Key: "..", URL: e.srv.URL},
	}
	for name, r := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.Prepare(e.ctx, r)
			require.ErrorIs(t, err, idem.ErrInvalidRequest)
		})
	}
	_, err := e.client.Do(e.ctx, nil)
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	_, err = e.client.Do(e.ctx, &idem.Operation{Scope: "default", Key: "missing"})
	require.ErrorIs(t, err, idem.ErrNotFound)
}

func TestInvalidOptions(t *testing.T) {
	e := newEnv(t)
	bad := map[string]idem.Option{
		"zero attempts":       idem.WithMaxAttempts(0),
		"negative elapsed":    idem.WithMaxElapsed(-time.Second),
		"no key placeholder":  idem.WithResultEndpoint("http://127.0.0.1/ops"),
		"header with colon":   idem.WithKeyHeader("Idem:Key", idem.KeyBare),
		"nil http client":     idem.WithHTTPClient(nil),
		"reconcile max < min": idem.WithReconcile(time.Minute, time.Second, time.Hour),
		"negative budget":     idem.WithRetryBudget(-1, 0.1),
	}
	for name, o := range bad {
		t.Run(name, func(t *testing.T) {
			c, err := idem.New(e.replica(), o)
			require.Error(t, err)
			require.Nil(t, c)
			require.Contains(t, err.Error(), "idem: ")
		})
	}
	_, err := idem.New(nil)
	require.ErrorContains(t, err, "idem.Open")
}

// WithMaxResponseBytes(math.MaxInt64) ("no limit") overflowed the read
// limit to a negative one: every body read empty, every 2xx was
// "undecodable", and no operation could ever settle.
func TestMaxResponseBytesUnlimited(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxResponseBytes(math.MaxInt64)))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.NotEmpty(t, res.ResourceID)
}

func TestKeyInBody(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithKeyInBody()))
	_, err := e.client.Prepare(e.ctx, idem.Request{URL: e.srv.URL + "/orders"})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "NewKey")
}

func TestSameKeyCallsShareOneRequest(t *testing.T) {
	e := newEnv(t)
	op, err := e.client.Prepare(e.ctx, e.req("shared", `{"amount":5}`))
	require.NoError(t, err)
	// Hold the server's answer until every caller has started.
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: "shared", Delay: 200 * time.Millisecond}))

	const callers = 16
	var wg sync.WaitGroup
	results := make([]*idem.Result, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.client.Do(e.ctx, op)
		}()
	}
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		require.Equal(t, results[0].ResourceID, results[i].ResourceID)
	}
	require.Len(t, e.submits("shared"), 1, "one request for all callers")
	require.Equal(t, 1, e.srv.Effects(scope, "shared"))
}

func TestUnknownErrorMatches(t *testing.T) {
	var e error = &idem.Error{Key: "k", Kind: idem.ErrUnknownOutcome, Cause: idem.ErrBudgetSpent}
	require.ErrorIs(t, e, idem.ErrUnknownOutcome)
	require.ErrorIs(t, e, idem.ErrBudgetSpent)
	require.False(t, errors.Is(e, idem.ErrFailed))
	var target *idem.Error
	require.ErrorAs(t, e, &target)
	require.Equal(t, "k", target.Key)
	_ = journal.StatePending
}
