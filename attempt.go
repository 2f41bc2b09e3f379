package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/journal"
)

// exchange is what one HTTP request/response taught us.
type exchange struct {
	status   int
	header   http.Header
	body     []byte
	tooLarge bool  // the body passed the cap and was cut
	err      error // transport error, or an error reading the body
	wrote    bool  // the request was fully written: the server may act on it
	// unsent: surely never sent. Only when net/http's trace shows it took
	// the request (GetConn) and never wrote it, or idem failed before
	// sending; a transport that reports no trace events gets no benefit of
	// the doubt.
	unsent     bool
	retryAfter time.Duration // capped by WithRetryAfterCap: what a caller waits
	// serverWait is the server's Retry-After bounded only by the
	// reconciler's longest interval: how long a handed-off operation is
	// left alone.
	serverWait time.Duration
	dur        time.Duration
}

// drainLimit is how much of an over-long body is read away so the
// connection can be reused; past it the connection is dropped instead.
const drainLimit = 64 << 10

// send performs one HTTP exchange for rec with its own timeout.
func (c *Client) send(ctx context.Context, rec *journal.Record, query bool) exchange {
	start := c.cfg.clock.Now()
	actx, cancel := context.WithTimeout(ctx, c.cfg.attemptTimeout)
	defer cancel()

	// "Never sent" and "maybe sent" are told apart by what net/http saw,
	// not by error text. net/http may itself resend a request carrying an
	// Idempotency-Key on a reused connection that died before any
	// response: the same bytes and key, so the server de-duplicates it.
	var wrote, traced, gotConn atomic.Bool
	trace := &httptrace.ClientTrace{
		GetConn: func(string) { traced.Store(true) },
		// Once a connection has the request it may be on the wire: net/http
		// writes it on another goroutine and, when the attempt's context
		// ends, can return before WroteRequest fires (so can a transport
		// wrapper that times out). Only a request no connection ever had
		// is surely unsent.
		GotConn:              func(httptrace.GotConnInfo) { gotConn.Store(true) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		GotFirstResponseByte: func() { wrote.Store(true) },
	}
	actx = httptrace.WithClientTrace(actx, trace)

	var req *http.Request
	var err error
	if query {
		req, err = http.NewRequestWithContext(actx, http.MethodGet, rec.QueryURL, nil)
	} else {
		req, err = http.NewRequestWithContext(actx, rec.Method, rec.URL, bytes.NewReader(rec.Body))
	}
	if err != nil {
		return exchange{err: fmt.Errorf("idem: build request: %w", err), unsent: true}
	}
	if !query {
		for name, vals := range rec.Header {
			req.Header[name] = append([]string(nil), vals...)
		}
		if c.cfg.keyHeader != "" {
			req.Header.Set(c.cfg.keyHeader, c.keyValue(rec.Key))
		}
	}
	if c.cfg.hook != nil {
		if err := c.cfg.hook(req); err != nil {
			return exchange{err: fmt.Errorf("idem: request hook: %w", err), unsent: true}
		}
	}
	if err := context.Cause(actx); err != nil {
		// Surely unsent (Close while the attempt was being journaled, say):
		// net/http would fail it before any trace event, which reads as
		// "maybe sent".
		return exchange{err: err, unsent: true}
	}
	resp, err := c.hc.Do(req)
	ex := exchange{wrote: wrote.Load()}
	if err != nil {
		// net/http's *url.Error quotes the URL as sent, with whatever the
		// request hook added (an API key in the query string): that text
		// is journaled and logged. Name the journaled URL instead.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			journaled := rec.URL
			if query {
				journaled = rec.QueryURL
			}
			err = &url.Error{Op: ue.Op, URL: journaled, Err: ue.Err}
		}
		ex.err = err
		ex.unsent = !ex.wrote && traced.Load() && !gotConn.Load()
		ex.dur = c.cfg.clock.Now().Sub(start)
		return ex
	}
	defer resp.Body.Close()
	ex.wrote = true
	ex.status = resp.StatusCode
	ex.header = resp.Header
	// One byte past the cap tells "over the cap" from "at it"; a cap of
	// math.MaxInt64 ("no limit") must not overflow to a negative limit,
	// which reads nothing and leaves every answer undecodable.
	ex.body, ex.err = io.ReadAll(io.LimitReader(resp.Body, min(c.cfg.maxResponse, math.MaxInt64-1)+1))
	if int64(len(ex.body)) > c.cfg.maxResponse {
		ex.body, ex.tooLarge = ex.body[:c.cfg.maxResponse], true
		_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	}
	if ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), c.cfg.clock.Now()); ok {
		ex.retryAfter = min(ra, c.cfg.retryAfterCap)
		ex.serverWait = min(ra, c.cfg.reconcileMax)
	}
	ex.dur = c.cfg.clock.Now().Sub(start)
	return ex
}

// sfStringEscaper escapes an RFC 8941 sf-string: checkName already limited
// keys to visible ASCII, so only the quote and the backslash need escaping.
// Built once: keyValue runs on every submit.
var sfStringEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

func (c *Client) keyValue(key string) string {
	if c.cfg.keyFormat == KeyQuoted {
		return `"` + sfStringEscaper.Replace(key) + `"`
	}
	return key
}

// step is one attempt's verdict as the loop sees it.
type step struct {
	verdict    Verdict
	retryAfter time.Duration
	notFound   bool // a result query answered 404
}

// submit sends the operation once. The attempt is journaled before the
// request is built, and its outcome (with any settlement) after.
func (d *driver) submit() (step, error) {
	c := d.c
	if d.preRecorded {
		d.preRecorded = false
	} else {
		now := d.now()
		if err := d.commit(func(r *journal.Record) {
			closeOpenAttempts(r)
			// The key window starts with the first attempt that may reach
			// the server: one after attempts that surely went unsent starts
			// it afresh, or the window would be spent before the key was
			// ever sent (see keyExpired).
			fresh := !maybeSent(r)
			r.Attempts = append(r.Attempts, journal.Attempt{Number: attemptCount(r) + 1, Kind: journal.AttemptSubmit, Start: now})
			if r.FirstSent.IsZero() || fresh {
				r.FirstSent = now
			}
		}); err != nil {
			return step{}, err
		}
	}
	d.exchanges++
	d.submits++
	number := attemptCount(d.rec)
	ex := c.send(d.ctx, d.rec, false)
	d.serverWait = ex.serverWait

	st := step{retryAfter: ex.retryAfter}
	var outcome string
	var out Outcome
	settle := false
	switch {
	case ex.status == 0 && ex.unsent:
		st.verdict, outcome = Throttled, "not_sent" // definitely not executed: back off, resend
	case ex.status == 0:
		st.verdict, outcome = Ambiguous, "response_lost"
	default:
		st.verdict = c.cfg.classify(ex.status)
		switch st.verdict {
		case Settled:
			var derr error
			switch {
			case ex.err != nil:
				derr = ex.err
			case ex.tooLarge:
				derr = fmt.Errorf("%w: body over %d bytes", errUndecodable, c.cfg.maxResponse)
			default:
				out, derr = c.cfg.decode(ex.status, ex.header, ex.body)
			}
			switch {
			case derr != nil:
				st.verdict, outcome = Ambiguous, "undecodable"
				ex.err = derr
			case out.State == StateProcessing:
				st.verdict, outcome = Processing, "accepted"
			case out.State.Terminal():
				settle, outcome = true, "settled"
			default:
				st.verdict, outcome = Ambiguous, "undecodable"
				ex.err = fmt.Errorf("%w: decoder returned state %q", errUndecodable, out.State)
			}
		case Processing:
			outcome = "in_flight"
		case Conflict, Rejected:
			if priorMaybeSent(d.rec, number) && !replayed(ex.header) {
				// An earlier attempt may have executed: this refusal may
				// come from a gateway or an expired credential rather than
				// from the operation's own stored result, and "failed"
				// would invite a retry under a new key: a second charge.
				st.verdict, outcome = Ambiguous, "refused_after_maybe_sent"
				break
			}
			settle, outcome = true, "rejected"
			if st.verdict == Conflict {
				outcome = "conflict"
			}
			out = Outcome{State: StateFailed, Reason: errorReason(ex.status, ex.body)}
		case Throttled:
			outcome = "throttled"
		default:
			st.verdict, outcome = Ambiguous, "ambiguous"
		}
	}

	now := d.now()
	err := d.commit(func(r *journal.Record) {
		recordOutcome(r, number, ex)
		switch {
		case settle:
			settleRecord(r, out, ex, now)
		case st.verdict == Processing:
			r.State = StateProcessing
			if out.ResourceID != "" {
				r.Result = &journal.Result{ResourceID: out.ResourceID, StatusCode: ex.status}
			}
		}
	})
	d.observe(number, false, ex, outcome)
	if err != nil {
		return st, err
	}
	if settle {
		// A settled 422 stays Conflict (st.verdict is still the
		// classifier's): no second call into the user's Classifier.
		if st.verdict != Conflict {
			st.verdict = Settled
		}
		c.budget.success()
	} else if st.verdict != Processing {
		c.budget.failure()
	}
	if d.ctx.Err() != nil && !settle {
		return st, d.leave(context.Cause(d.ctx))
	}
	return st, nil
}

// priorMaybeSent reports whether a submit before attempt number may have
// reached the server.
func priorMaybeSent(rec *journal.Record, number int) bool {
	for _, a := range rec.Attempts {
		if a.Number < number && submitMaybeSent(a) {
			return true
		}
	}
	return rec.State == StateProcessing
}

// replayed reports whether the server says the answer is the stored one
// for this key (Stripe's Idempotent-Replayed header): then a refusal is
// the operation's own outcome, whatever came before.
func replayed(h http.Header) bool {
	return strings.EqualFold(h.Get("Idempotent-Replayed"), "true")
}

// query asks the result endpoint; the attempt is journaled with its outcome
// in one commit (a GET changes nothing on the server).
func (d *driver) query() (step, error) {
	c := d.c
	// Terminal is final: a manual resolution made while this call waited
	// must stop it before anything is sent. A read, not a commit: no fsync.
	if cur, err := c.store.Get(d.wctx, d.rec.Scope, d.rec.Key); err == nil && !cur.Open() {
		d.rec = cur
		return step{}, errSettledElsewhere
	}
	d.exchanges++
	number := attemptCount(d.rec) + 1
	start := d.now()
	ex := c.send(d.ctx, d.rec, true)
	d.serverWait = ex.serverWait

	st := step{verdict: Ambiguous, retryAfter: ex.retryAfter}
	outcome := "query_failed"
	var out Outcome
	switch {
	case ex.status >= 200 && ex.status < 300 && ex.err == nil && !ex.tooLarge:
		var derr error
		out, derr = c.cfg.decode(ex.status, ex.header, ex.body)
		switch {
		case derr != nil:
			ex.err = derr
		case out.State.Terminal():
			st.verdict, outcome = Settled, "settled"
		case out.State == StateProcessing:
			st.verdict, outcome = Processing, "processing"
		}
	case ex.status == http.StatusNotFound:
		st.notFound, outcome = true, "query_not_found"
	case ex.status == http.StatusTooManyRequests || ex.status == http.StatusServiceUnavailable:
		st.verdict, outcome = Throttled, "throttled"
	}

	now := d.now()
	err := d.commit(func(r *journal.Record) {
		closeOpenAttempts(r)
		r.Attempts = append(r.Attempts, journal.Attempt{Number: number, Kind: journal.AttemptQuery, Start: start})
		recordOutcome(r, number, ex)
		switch st.verdict {
		case Settled:
			settleRecord(r, out, ex, now)
		case Processing:
			r.State = StateProcessing
		}
	})
	d.observe(number, true, ex, outcome)
	if err != nil {
		return st, err
	}
	switch st.verdict {
	case Settled:
		c.budget.success()
	case Ambiguous, Throttled:
		c.budget.failure()
	}
	if d.ctx.Err() != nil && st.verdict != Settled {
		return st, d.leave(context.Cause(d.ctx))
	}
	return st, nil
}

// recordOutcome fills in attempt number's outcome.
func recordOutcome(r *journal.Record, number int, ex exchange) {
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		a := &r.Attempts[i]
		if a.Number != number {
			continue
		}
		a.Done = true
		// Wrote is what maybeSent reads: it must say "may have been
		// written" whenever the request is not surely unsent. A transport
		// that reports no trace events gets no benefit of the doubt here
		// either, or a later 4xx would fail an operation the server
		// performed (priorMaybeSent) and a cancellation would leave it
		// "pending, never sent".
		a.Wrote = ex.wrote || !ex.unsent
		a.Status = ex.status
		a.RetryAfter = ex.retryAfter
		a.Duration = ex.dur
		if ex.err != nil {
			a.Err = truncate(ex.err.Error(), 512)
		}
		return
	}
}

func settleRecord(r *journal.Record, out Outcome, ex exchange, now time.Time) {
	body := ex.body
	if len(body) > storedBodyBytes {
		body = body[:storedBodyBytes]
	}
	r.State = out.State
	r.Result = &journal.Result{ResourceID: out.ResourceID, StatusCode: ex.status, Body: bytes.Clone(body), Reason: out.Reason}
	r.Review = ""
	r.Settled = now
	r.NextDue = time.Time{}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// observe logs an attempt and calls the attempt hook.
func (d *driver) observe(number int, query bool, ex exchange, outcome string) {
	c := d.c
	kind := "submit"
	if query {
		kind = "query"
	}
	if c.log.Enabled(d.ctx, slog.LevelDebug) {
		attrs := append(opAttrs(d.rec),
			slog.Int("attempt", number), slog.String("kind", kind), slog.Int("status", ex.status),
			slog.String("outcome", outcome), slog.Bool("wrote", ex.wrote), slog.Duration("elapsed", ex.dur))
		if ex.retryAfter > 0 {
			attrs = append(attrs, slog.Duration("retry_after", ex.retryAfter))
		}
		if ex.err != nil {
			attrs = append(attrs, slog.String("err", ex.err.Error()))
		}
		c.log.LogAttrs(d.ctx, slog.LevelDebug, "idem: attempt", attrs...)
	}
	if c.cfg.hooks.Attempt != nil {
		c.cfg.hooks.Attempt(AttemptEvent{
			Scope: d.rec.Scope, Key: d.rec.Key, Number: number, Query: query, Wrote: ex.wrote,
			StatusCode: ex.status, Err: ex.err, RetryAfter: ex.retryAfter, Duration: ex.dur,
		})
	}
}
