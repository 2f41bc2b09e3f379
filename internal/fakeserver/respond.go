package fakeserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// garbageBody is the body of the garbage-body fault: not JSON.
const garbageBody = "<html>\x00\xff502 gateway hiccup{\"state\":"

type errorJSON struct {
	Error string `json:"error"`
}

// writeJSON writes a JSON response with an exact Content-Length.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// encodeFailedBody answers when a response cannot be encoded.
var encodeFailedBody = []byte(`{"error":"internal server error: the fake server could not encode its response"}`)

// encodeJSON returns the response status and body that encode v. The values
// encoded hold only strings, which json.Marshal always encodes; should it
// fail all the same, the answer is 500 with a JSON error body.
func encodeJSON(status int, v any) (int, []byte) {
	b, err := json.Marshal(v)
	if err != nil {
		return http.StatusInternalServerError, encodeFailedBody
	}
	return status, b
}

func writeError(w http.ResponseWriter, status int, msg string) {
	status, body := encodeJSON(status, errorJSON{Error: msg})
	writeJSON(w, status, body)
}

// bodyError returns the answer to a failure to read the request body.
func bodyError(err error) (int, string) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge, "request body too large"
	}
	return http.StatusBadRequest, "reading request body: " + err.Error()
}

// setRetryAfter sets Retry-After to d (0 means 1s) in whole seconds rounded
// up, or to the HTTP-date now+d rounded up to the second.
func setRetryAfter(w http.ResponseWriter, d time.Duration, httpDate bool, now time.Time) {
	if d <= 0 {
		d = time.Second
	}
	if httpDate {
		t := now.Add(d)
		if t2 := t.Truncate(time.Second); !t2.Equal(t) {
			t = t2.Add(time.Second)
		}
		// An HTTP-date has a four-digit year: a huge delay saturates at
		// the last date it can name rather than printing one no client
		// parses.
		if t.After(lastHTTPDate) {
			t = lastHTTPDate
		}
		w.Header().Set("Retry-After", t.UTC().Format(http.TimeFormat))
		// Date from the same clock, as a real server's: a client judges
		// the date against it, and net/http's own Date reads the wall
		// clock, not the one the tests inject.
		w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
		return
	}
	// Rounded up without adding to d: d + 1s - 1 overflowed for the
	// largest durations and sent a negative Retry-After.
	secs := d / time.Second
	if d%time.Second != 0 {
		secs++
	}
	w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
}

// lastHTTPDate is the latest instant an HTTP-date can name.
var lastHTTPDate = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// ErrClosing is the cause with which a server's owner cancels the
// requests' base context when it closes (idemtest's Server.Close): an
// answer held by a delay is then sent at once, whereas a request whose
// client gave up is not answered.
var ErrClosing = errors.New("fakeserver: server closing")

// wait blocks for d or until ctx is done, without leaving a goroutine or a
// timer behind.
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// clientGone reports whether ctx, a request's, ended because its client
// gave up (a timeout, a cancel: the connection closed), not because the
// server is closing.
func clientGone(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrClosing)
}

// dropConn closes the connection without an answer: it hijacks and closes
// it, or, where the ResponseWriter cannot be hijacked (HTTP/2), aborts the
// handler with http.ErrAbortHandler, which net/http turns into a reset.
func dropConn(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// writeTruncated announces body's full length, sends its first half and
// closes the connection.
func writeTruncated(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body[:len(body)/2])
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
	// Otherwise net/http closes the connection itself after a short body.
}

// answer is a response decided under the lock, written after it.
type answer struct {
	status   int
	body     []byte
	replayed bool
	// retryAfter, when set, is sent as Retry-After (with httpDate).
	retryAfter time.Duration
	httpDate   bool
	// keyIgnored marks the answer "Idempotency-Status: ignored"
	// (Behavior.KeyIgnored), whatever fault shapes it.
	keyIgnored bool
}

func (a answer) write(w http.ResponseWriter, now time.Time) {
	if a.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if a.retryAfter > 0 {
		setRetryAfter(w, a.retryAfter, a.httpDate, now)
	}
	writeJSON(w, a.status, a.body)
}

func errorAnswer(status int, msg string) answer {
	status, body := encodeJSON(status, errorJSON{Error: msg})
	return answer{status: status, body: body}
}

// faultAnswer returns the answer of the faults that answer instead of
// processing the request (error-before-commit, throttle, unavailable).
func faultAnswer(f applied) answer {
	switch f.kind {
	case Throttle:
		a := errorAnswer(http.StatusTooManyRequests, "too many requests")
		a.retryAfter, a.httpDate = orOneSecond(f.retryAfter), f.httpDate
		return a
	case Unavailable:
		a := errorAnswer(http.StatusServiceUnavailable, "service unavailable")
		a.retryAfter, a.httpDate = orOneSecond(f.retryAfter), f.httpDate
		return a
	}
	return errorAnswer(http.StatusInternalServerError, msgInternal)
}

func orOneSecond(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return d
}

// deliver writes a, shaped by the response fault f (if any): it waits for
// the delay, drops the connection, or mangles the body. It calls done with
// the status sent (0 if dropped, or if the client gave up while the answer
// was held) before anything reaches the client.
func deliver(w http.ResponseWriter, r *http.Request, a answer, f applied, now func() time.Time, done func(status int)) {
	if a.keyIgnored {
		w.Header().Set("Idempotency-Status", "ignored")
	}
	switch f.kind {
	case DropAfterCommit, LostAnswerLag:
		done(0)
		dropConn(w)
		return
	case DelayResponse, StillRunning, StillRunningDecline, StillRunningProcessing:
		wait(r.Context(), f.delay)
		if clientGone(r.Context()) {
			// Nothing reaches a client that has gone: logged as no
			// answer (0), as a dropped connection is. The connection is
			// closed, not left to net/http, which would answer an empty
			// 200 to a client that only half-closed and still reads.
			done(0)
			dropConn(w)
			return
		}
	case ErrorAfterCommit:
		a = errorAnswer(http.StatusInternalServerError, msgInternal)
	case GarbageBody:
		done(a.status)
		if a.replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		writeJSON(w, a.status, []byte(garbageBody))
		return
	case TruncatedBody:
		done(a.status)
		if a.replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		writeTruncated(w, a.status, a.body)
		return
	}
	done(a.status)
	a.write(w, now())
}
