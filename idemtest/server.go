package idemtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// Server is a fake idempotent payment API listening on 127.0.0.1. Its
// methods are safe for concurrent use.
type Server struct {
	// URL is the base URL, of the form http://127.0.0.1:port, with no
	// trailing slash.
	URL string

	ts     *httptest.Server
	srv    *fakeserver.Server
	cancel context.CancelCauseFunc // ends the requests' contexts
}

// NewServer starts and returns a new Server. The caller should call Close
// when finished, to shut it down. If an option is invalid (a [Profile] with a
// rate outside 0..1, a header name with a space, a negative retention, say)
// it starts nothing and returns an error that says what to change.
func NewServer(opts ...Option) (*Server, error) {
	var cfg fakeserver.Config
	for _, o := range opts {
		// A nil Option is skipped, as journal.Open skips one, rather than
		// panicking: NewServer reports bad options, it does not crash.
		if o != nil {
			o.apply(&cfg)
		}
	}
	srv, err := fakeserver.New(cfg)
	if err != nil {
		return nil, rewrap("NewServer", err)
	}
	ts := httptest.NewUnstartedServer(srv)
	// Request contexts derive from base, which Close cancels first: a
	// response held by a delay fault is then sent at once.
	base, cancel := context.WithCancelCause(context.Background())
	ts.Config.BaseContext = func(net.Listener) context.Context { return base }
	ts.Start()
	return &Server{URL: ts.URL, ts: ts, srv: srv, cancel: cancel}, nil
}

// rewrap turns an error of package fakeserver, "fakeserver: Method: cause"
// wrapping cause, into "idemtest: method: cause".
func rewrap(method string, err error) error {
	if cause := errors.Unwrap(err); cause != nil {
		err = cause
	}
	return fmt.Errorf("idemtest: %s: %w", method, err)
}

// Client returns an HTTP client configured for requests to the server; Close
// closes its idle connections. It reuses connections, so note that its
// Transport, like any net/http Transport, silently resends a request that
// carries an Idempotency-Key header when a reused connection dies before any
// answer: [Server.Requests] shows both.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close shuts down the server and blocks until all outstanding requests on
// it have completed. Responses held by a delay fault are sent at once.
// Webhook deliveries (WithWebhook) still queued or in flight are stopped.
func (s *Server) Close() {
	s.cancel(fakeserver.ErrClosing)
	s.ts.Close()
	s.srv.Close() // webhook deliveries, once no request can make more
}

// ResultURL returns the URL of the result endpoint for key:
// s.URL + "/operations/" + url.PathEscape(key).
func (s *Server) ResultURL(key string) string {
	return s.URL + "/operations/" + url.PathEscape(key)
}

// ResultTemplate returns the template of the result endpoint,
// s.URL + "/operations/{key}", as idem.WithResultEndpoint takes it: idem
// puts each operation's key, escaped, in place of {key}, which gives
// [Server.ResultURL] of the key.
func (s *Server) ResultTemplate() string {
	return s.URL + "/operations/{key}"
}

// Inject scripts a fault: it applies to the next f.Count matching requests
// (Count 0 means 1), only those with key f.Key if set, and result queries
// instead of submits if f.Query. If f is invalid (an unknown kind, a negative
// count or duration, a query fault of a kind that does not apply to result
// queries) or 10,000 faults are already pending, it scripts nothing and
// returns an error that says what to change.
func (s *Server) Inject(f Fault) error {
	if err := s.srv.Inject(f.internal()); err != nil {
		return rewrap("Inject", err)
	}
	return nil
}

// SetProfile replaces the random faults. If p is invalid (a rate outside
// 0..1, rates that sum to more than 1, an unknown kind, a negative duration)
// it keeps the current profile and returns an error that says what to change.
func (s *Server) SetProfile(p Profile) error {
	if err := s.srv.SetProfile(p.internal()); err != nil {
		return rewrap("SetProfile", err)
	}
	return nil
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats { return Stats(s.srv.Stats()) }

// Effects returns the side effects performed for key in scope (the value of
// the scope header, "" if none), across expiries.
func (s *Server) Effects(scope, key string) int { return s.srv.Effects(scope, key) }

// KeyStats returns the counters of key in scope, across expiries: its side
// effects, someone else's (see Preempt) and the submits that arrived once
// its answer could no longer change.
func (s *Server) KeyStats(scope, key string) KeyStats {
	return KeyStats(s.srv.KeyStats(scope, key))
}

// Preempt makes someone else use key in scope first: a request with the
// key and a body of its own executes now, and is processing for hold (by
// the server's clock). Meanwhile requests with the key get 409; after it,
// a different request gets 422 (the behaviour's conflict status), or under
// NoBodyCompare a silent replay of the other request's 201. Its side
// effect counts in KeyStats.ForeignEffects, not in Effects. It returns an
// error if hold is negative or the key is already in use.
func (s *Server) Preempt(scope, key string, hold time.Duration) error {
	if err := s.srv.Preempt(scope, key, hold); err != nil {
		return rewrap("Preempt", err)
	}
	return nil
}

// Behavior returns the server's behaviour, as given to NewServer.
func (s *Server) Behavior() Behavior { return Behavior(s.srv.Behavior()) }

// Requests returns a copy of the log of requests received, in arrival order
// (the last 100,000; requests to /_ endpoints are not logged).
func (s *Server) Requests() []Request {
	log := s.srv.Requests()
	out := make([]Request, len(log))
	for i, r := range log {
		out[i] = requestOf(r)
	}
	return out
}

// Reset returns the server to its state just after NewServer: no keys,
// counters, log or scripted faults, the profile given to NewServer and its
// seed.
func (s *Server) Reset() { s.srv.Reset() }
