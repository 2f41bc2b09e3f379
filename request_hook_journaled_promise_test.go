package idem_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// The request hook runs after idem has put the journaled key and body on
// the request, to add credentials. Middleware written for plain HTTP
// clients does more: a fresh Idempotency-Key per request (a request-id
// habit), a body re-encoded with a nonce (some signing schemes), the
// current ETag over the journaled If-Match. Each resend after a lost
// answer then went out as another request. An attempt the hook changed
// so is now never sent, and says what the hook changed.

// stripeCharges models Stripe's idempotency layer
// (docs.stripe.com/api/idempotent_requests): it saves the first answer
// to a key and replays it to the key's later requests, and "compares
// incoming parameters to those of the original request and errors if
// they're not the same": a 400 idempotency_error. Each new key charges,
// and each request without one;
// the first charge's answer is lost (the connection closed).
type stripeCharges struct {
	srv     *httptest.Server
	clock   *idemtest.Clock // the clients', one for all of them
	mu      sync.Mutex
	bodies  map[string]string // first body by key
	charges int
	keys    []string // the key of every request, as sent
}

func newStripeCharges(t testing.TB) *stripeCharges {
	t.Helper()
	s := &stripeCharges{bodies: map[string]string{}, clock: idemtest.NewClock(epoch)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stripeCharges) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := strings.Join(r.Header.Values("Idempotency-Key"), ",")
	s.mu.Lock()
	s.keys = append(s.keys, key)
	first, seen := s.bodies[key]
	if !seen {
		if key != "" { // a request without a key is charged each time
			s.bodies[key] = string(body)
		}
		s.charges++
	}
	n := s.charges
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case seen && first != string(body):
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '`+key+`' if you meant to execute a different request."}}`)
	case !seen && n == 1:
		dropConnection(w) // charged, its answer lost
	default:
		w.Header().Set("Idempotent-Replayed", fmt.Sprint(seen))
		_, _ = fmt.Fprintf(w, `{"id":"ch_%d","object":"charge","status":"succeeded"}`, n)
	}
}

func (s *stripeCharges) req() idem.Request {
	return idem.Request{Key: "order-1001", URL: s.srv.URL + "/v1/charges", Body: []byte(`{"amount":2000,"currency":"eur"}`)}
}

func (s *stripeCharges) count() (charges, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.charges, len(s.keys)
}

// hookedClient opens a Client with the default settings for s on the
// journal at path, with hook as its request hook.
func (s *stripeCharges) hookedClient(t testing.TB, path string, hook func(*http.Request) error) *idem.Client {
	t.Helper()
	store, err := journal.Open(path)
	require.NoError(t, err)
	c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(s.clock), idem.WithRequestHook(hook))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Close()
		_ = store.Close()
	})
	return c
}

// requireHookRefused submits s's charge through hook, given the count
// of its calls, and asserts that no attempt was sent, each saying the
// hook changed what (and what to do); then that under a hook that sets
// credentials only Resume and the caller's retry charge once.
func (s *stripeCharges) requireHookRefused(t *testing.T, what string, hook func(r *http.Request, n int) error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.journal")
	n := 0
	c := s.hookedClient(t, path, func(r *http.Request) error {
		n++
		return hook(r, n)
	})
	_, err := c.Submit(t.Context(), s.req())
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Contains(t, err.Error(), what)
	charges, requests := s.count()
	require.Zero(t, requests, "requests the server got from a hook that changed %s", what)
	require.Zero(t, charges)
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "order-1001")
	require.NoError(t, err)
	require.Equal(t, idem.StatePending, rec.State)
	require.NotEmpty(t, rec.Attempts)
	for _, a := range rec.Attempts {
		require.False(t, a.Wrote, "attempt %d Wrote", a.Number)
		require.Contains(t, a.Err, what, "attempt %d", a.Number)
		require.Contains(t, a.Err, "set credentials only", "attempt %d", a.Number)
	}

	require.NoError(t, c.Close())
	require.NoError(t, c.Store().(*journal.Store).Close())
	c = s.hookedClient(t, path, func(r *http.Request) error {
		r.SetBasicAuth("sk_test_4eC39HqLyjWDarjtT1zdp7dc", "")
		return nil
	})
	// Resume sends it, its answer lost; the caller's retry resends it.
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	res, err := c.Submit(t.Context(), s.req())
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 1, s.charges, "keys sent: %v", s.keys)
	require.Equal(t, []string{"order-1001", "order-1001"}, s.keys, "keys sent")
}

// A hook that sets a fresh Idempotency-Key on every request (as a
// request-id middleware does): the lost answer's resend went out under
// another key, a second charge at Stripe, settled succeeded by its
// answer (2 charges). So too for a hook that adds a second one
// (Header.Add), removes it (no key: each request charges), or writes
// one under a lower-case name beside idem's (net/http sends both
// fields, which a server reads as one list). Now no attempt is sent: 0
// charges, pending, its error naming the header; under a hook that
// sets credentials only, 1 charge.
func TestRequestHookChangingTheKeyIsNeverSent(t *testing.T) {
	for name, hook := range map[string]func(r *http.Request, id string){
		"fresh":      func(r *http.Request, id string) { r.Header.Set("Idempotency-Key", id) },
		"added":      func(r *http.Request, id string) { r.Header.Add("Idempotency-Key", id) },
		"removed":    func(r *http.Request, _ string) { r.Header.Del("Idempotency-Key") },
		"lower-case": func(r *http.Request, id string) { r.Header["idempotency-key"] = []string{id} },
	} {
		t.Run(name, func(t *testing.T) {
			newStripeCharges(t).requireHookRefused(t, "Idempotency-Key", func(r *http.Request, n int) error {
				hook(r, fmt.Sprintf("req-%d", n))
				return nil
			})
		})
	}
}

// A signer that re-encodes the body with a nonce before signing it: the
// resend's body differed from the first copy's, Stripe refused it 400
// idempotency_error, and the charge made was left unknown for a person
// (1 charge, 4 requests). Now no attempt is sent, its error saying the
// body was replaced; under a hook that sets credentials only, 1 charge,
// succeeded.
func TestRequestHookReEncodedBodyIsNeverSent(t *testing.T) {
	newStripeCharges(t).requireHookRefused(t, "body", func(r *http.Request, n int) error {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		b = fmt.Appendf(bytes.TrimSuffix(b, []byte("}")), `,"nonce":%d}`, n)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		r.Header.Set("X-Signature", base64.StdEncoding.EncodeToString(b))
		return nil
	})
}

// A hook that rewrites the method or the journaled path (a router's
// rewrite, a version swapped in) sends another operation under the
// journaled key: never sent.
func TestRequestHookChangingMethodOrPathIsNeverSent(t *testing.T) {
	for what, hook := range map[string]func(r *http.Request){
		"method": func(r *http.Request) { r.Method = http.MethodPut },
		"path":   func(r *http.Request) { r.URL.Path = strings.Replace(r.URL.Path, "/v1/", "/v2/", 1) },
	} {
		t.Run(what, func(t *testing.T) {
			newStripeCharges(t).requireHookRefused(t, what, func(r *http.Request, _ int) error {
				hook(r)
				return nil
			})
		})
	}
}

// What a hook may do stays sent: set the key to the value it holds
// already, add headers of its own (a signature over the body it read
// and put back, byte for byte), Basic auth, a query parameter (an API
// key), a path prefix (Telegram's /bot<token>), a precondition the
// journal does not hold. One charge, the key and body as journaled on
// both copies.
func TestRequestHookCredentialsOnlyAreSent(t *testing.T) {
	s := newStripeCharges(t)
	c := s.hookedClient(t, filepath.Join(t.TempDir(), "idem.journal"), func(r *http.Request) error {
		r.Header.Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.Header.Set("X-Signature", base64.StdEncoding.EncodeToString(b))
		r.SetBasicAuth("sk_test_4eC39HqLyjWDarjtT1zdp7dc", "")
		q := r.URL.Query()
		q.Set("api_key", "planted-query-key")
		r.URL.RawQuery = q.Encode()
		r.URL.Path = "/acct_1" + r.URL.Path
		r.Header["if-none-match"] = []string{`"x"`}
		return nil
	})
	res, err := c.Submit(t.Context(), s.req())
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 1, s.charges)
	require.Equal(t, []string{"order-1001", "order-1001"}, s.keys, "keys sent")
	require.Equal(t, map[string]string{"order-1001": `{"amount":2000,"currency":"eur"}`}, s.bodies)
}

// Banking Circle's update under its concurrency token in If-Match
// (docs.bankingcircleconnect.com/guides/concurrency-handling), which it
// checks, not the key (modelled), built on token 1 and journaled so. A
// hook fetches the current token per attempt and sets it over the
// journaled one, canonically or under a lower-case name (net/http sends
// both fields; the server reads either). The update applies, its answer
// is lost, and the resend carried token 2, the version the first copy
// moved to: applied twice, settled succeeded. Now the resend is never
// sent: 1 update, unknown.
func TestRequestHookOverwritingJournaledIfMatchIsNeverSent(t *testing.T) {
	for name, set := range map[string]func(h http.Header, v string){
		"canonical":  func(h http.Header, v string) { h.Set("If-Match", v) },
		"lower-case": func(h http.Header, v string) { h["if-match"] = []string{v} },
	} {
		t.Run(name, func(t *testing.T) {
			s := &tokenGuarded{token: 1}
			var lost atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The token is read whatever the field's spelling, the
				// last one given (net/http sends both lines).
				if vs := r.Header.Values("If-Match"); len(vs) > 0 {
					r.Header.Set("If-Match", vs[len(vs)-1])
				}
				if r.Method == http.MethodPut && lost.CompareAndSwap(false, true) {
					s.serve(httptest.NewRecorder(), r)
					dropConnection(w) // applied, its answer lost
					return
				}
				s.serve(w, r)
			}))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithRequestHook(func(r *http.Request) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				set(r.Header, fmt.Sprintf(`"%d"`, s.token))
				return nil
			}))
			_, err := c.Submit(t.Context(), updateRequest(srv.URL, false))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Contains(t, err.Error(), "If-Match")
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 1, s.applied, "updates applied")
			require.Len(t, s.puts, 1, "the first copy only")
			rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, rec.State)
			require.Greater(t, len(rec.Attempts), 1)
			require.True(t, rec.Attempts[0].Wrote)
			for _, a := range rec.Attempts[1:] {
				require.False(t, a.Wrote, "attempt %d Wrote", a.Number)
				require.Contains(t, a.Err, "If-Match", "attempt %d", a.Number)
			}
		})
	}
}

// accountInContext is the key of the merchant's account in a caller's
// context, for accountFromContext.
type accountInContext struct{}

// accountFromContext is a platform's request hook written as Connect
// middleware: the platform's key, and Stripe-Account set to the account
// the caller's context names, the platform's own ("") when it names
// none, over the journaled one.
func accountFromContext(r *http.Request) error {
	r.Header.Set("Authorization", "Bearer sk_platform")
	account, _ := r.Context().Value(accountInContext{}).(string)
	r.Header.Set("Stripe-Account", account)
	return nil
}

// chargeLostThenResume submits merchant acct_B's order "1001" to srv
// (p's) through c, its caller's context naming the account, with
// resultURL; the charge is made and its answer lost with its caller
// gone. Then Resume runs, as at start-up, under no caller's context;
// the operation must be left unknown, its last attempt never sent and
// naming the header.
func (p *connectPlatform) chargeLostThenResume(t *testing.T, srv *httptest.Server, resultURL string) {
	t.Helper()
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithRequestHook(accountFromContext))
	ctx, stop := context.WithCancel(context.WithValue(t.Context(), accountInContext{}, "acct_B"))
	p.mu.Lock()
	p.lost["acct_B"] = stop
	p.mu.Unlock()
	_, err := c.Submit(ctx, idem.Request{Scope: "acct_B", Key: "1001", URL: srv.URL + "/v1/charges", ResultURL: resultURL,
		Body: []byte(`{"amount":1000,"currency":"eur"}`), Header: http.Header{"Stripe-Account": {"acct_B"}}})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	_, err = c.Resume(context.Background())
	require.NoError(t, err)
	rec, err := c.Store().Get(t.Context(), "acct_B", "1001")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Nil(t, rec.Result)
	last := rec.Attempts[len(rec.Attempts)-1]
	require.Greater(t, last.Number, 1)
	require.False(t, last.Wrote)
	require.Contains(t, last.Err, "Stripe-Account")
}

// accountFromContext over the journaled Stripe-Account
// (docs.stripe.com/connect/authentication: the header says which account
// the request acts as; keys are scoped per account, modelled by
// connectPlatform). B's charge is made, its answer lost; Resume's resend
// went to the platform's account under the same key: a second charge,
// settled succeeded with the platform's (2 charges). Now the resend is
// never sent: 1 charge, B's, unknown, its attempt naming the header.
func TestRequestHookOverwritingJournaledAccountIsNeverSent(t *testing.T) {
	p, srv := newConnectPlatform(t)
	p.chargeLostThenResume(t, srv, "")
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, map[string]int{"acct_B": 1}, p.charges, "charges by account")
	require.Equal(t, []string{"acct_B"}, p.sentTo["1001"], "the account of each request under the key")
}

// The account set by the hook alone (accountFromContext, the request
// journaling none), as README's connected-accounts paragraph warns
// against: B's charge made on acct_B, its answer lost; Resume's resend,
// under no caller's context, went to the platform's own account under
// the same key: a second charge, settled succeeded with the platform's
// (charges acct_B 1, platform 1). Now the first attempt is never sent,
// nor Resume's: 0 charges, pending, its error saying to journal the
// account.
func TestRequestHookAddingAnUnjournaledAccountIsNeverSent(t *testing.T) {
	p, srv := newConnectPlatform(t)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithRequestHook(accountFromContext))
	ctx, stop := context.WithCancel(context.WithValue(t.Context(), accountInContext{}, "acct_B"))
	defer stop()
	p.mu.Lock()
	p.lost["acct_B"] = stop
	p.mu.Unlock()
	_, err := c.Submit(ctx, idem.Request{Scope: "acct_B", Key: "1001", URL: srv.URL + "/v1/charges",
		Body: []byte(`{"amount":1000,"currency":"eur"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Contains(t, err.Error(), "Request.Header")

	_, err = c.Resume(context.Background())
	require.NoError(t, err)
	rec, err := c.Store().Get(t.Context(), "acct_B", "1001")
	require.NoError(t, err)
	require.Equal(t, idem.StatePending, rec.State)
	for _, a := range rec.Attempts {
		require.False(t, a.Wrote, "attempt %d Wrote", a.Number)
		require.Contains(t, a.Err, "added the Stripe-Account header", "attempt %d", a.Number)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(t, p.charges, "charges by account")
	require.Empty(t, p.sentTo["1001"], "the account of each request under the key")
}

// The same on the result query, which carries the journaled account: the
// platform's own order "1001" was charged too, on its account under the
// same key. Resume's query went to the platform's account and read its
// charge, which settled B's order succeeded with the platform's. Now the
// query is never sent either: B's order unknown, no result.
func TestRequestHookOverwritingJournaledAccountOnTheQueryIsNeverSent(t *testing.T) {
	p := &connectPlatform{answers: map[string]string{" 1001": `{"id":"ch_platform","object":"charge","status":"succeeded"}`},
		charges: map[string]int{"": 1}, sentTo: map[string][]string{}, lost: map[string]func(){}}
	var queriedAs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			p.serve(w, r)
			return
		}
		account := r.Header.Get("Stripe-Account")
		p.mu.Lock()
		queriedAs = append(queriedAs, account)
		answer, ok := p.answers[account+" "+strings.TrimPrefix(r.URL.Path, "/v1/charges/by-key/")]
		p.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	p.chargeLostThenResume(t, srv, srv.URL+"/v1/charges/by-key/1001")
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(t, queriedAs, "the accounts queried")
	require.Equal(t, map[string]int{"": 1, "acct_B": 1}, p.charges, "charges by account")
}

// A caller's deadline that ends the call between attempts the hook
// changed (a fresh key per request): its error said "context deadline
// exceeded" and the state, never why nothing was sent. Now it names what
// the hook changed; still pending, nothing sent.
func TestRequestHookChangeNamedWhenTheCallersDeadlineEnds(t *testing.T) {
	s := newStripeCharges(t)
	ctx, stop := context.WithCancelCause(t.Context())
	n := 0
	c := s.hookedClient(t, filepath.Join(t.TempDir(), "idem.journal"), func(r *http.Request) error {
		if n++; n == 2 {
			stop(context.DeadlineExceeded) // the deadline passes as the second attempt is made
		}
		r.Header.Set("Idempotency-Key", fmt.Sprintf("req-%d", n))
		return nil
	})
	_, err := c.Submit(ctx, s.req())
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "never sent")
	require.Contains(t, err.Error(), "Idempotency-Key")
	charges, requests := s.count()
	require.Zero(t, requests)
	require.Zero(t, charges)
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "order-1001")
	require.NoError(t, err)
	require.Equal(t, idem.StatePending, rec.State)
}
