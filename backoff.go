package idem

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// The default backoff between attempts: exponential with jitter.
const (
	DefaultInitialInterval = 500 * time.Millisecond
	DefaultMultiplier      = 2.0
	DefaultJitter          = 0.5 // each wait is drawn from ±50% of the interval
	DefaultMaxInterval     = 30 * time.Second
)

// DefaultRetryAfterCap bounds how long a server's Retry-After can make idem
// wait, so a hostile or broken header cannot park a caller for hours.
const DefaultRetryAfterCap = 60 * time.Second

// newDefaultBackoff is the policy used unless WithBackoff replaces it. Its
// elapsed-time limit is off: the client's own budget decides when to stop.
func newDefaultBackoff() backoff.BackOff {
	return jitteredBackoff(DefaultInitialInterval, DefaultMaxInterval)
}

// jitteredBackoff is an exponential backoff from first to most, by
// DefaultMultiplier with DefaultJitter, never ending by itself (the
// caller's budget, context or Close does): the shape of every backoff
// idem keeps.
func jitteredBackoff(first, most time.Duration, opts ...backoff.ExponentialBackOffOpts) *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(append([]backoff.ExponentialBackOffOpts{
		backoff.WithInitialInterval(first),
		backoff.WithMultiplier(DefaultMultiplier),
		backoff.WithRandomizationFactor(DefaultJitter),
		backoff.WithMaxInterval(most),
		backoff.WithMaxElapsedTime(0),
	}, opts...)...)
}

// maxRetryAfterLen rejects absurd header values before parsing them.
const maxRetryAfterLen = 64

// maxFoldedLen bounds a Retry-After line a proxy folded from several
// fields (ParseRetryAfterHeader).
const maxFoldedLen = 4 * maxRetryAfterLen

// maxServerDateSkew is how far an answer's Date may read from our clock
// and still be taken for the server's clock (ParseRetryAfterHeader).
// Clocks minutes apart are common; a day apart is a broken clock, the
// server's (a device that lost its time reads 1970) or ours (set wrong by
// days), and the Date alone is not believed: an HTTP-date is judged by
// both clocks (parseRetryAfterFar).
const maxServerDateSkew = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value, either delta-seconds
// ("120") or an HTTP-date, relative to now. Delta-seconds may carry a
// decimal fraction, as some servers send them ("2.0", "1.5"): it is
// rounded up to a whole millisecond, so a wait is never shorter than
// asked. Only digits with an optional "." and more digits are read;
// signs, exponents, hexadecimal, "NaN", "1." and ".5" are malformed. It
// reports false for an empty or malformed value, which callers ignore. A
// date in the past means no wait; a huge number of seconds or a far-off
// date saturates at a year rather than overflowing, and the client caps
// it (WithRetryAfterCap). It never panics.
//
// An HTTP-date is judged against now: ParseRetryAfterHeader judges it
// against the answer's own Date instead, which is what idem does.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	return parseRetryAfter(v, now)
}

// ParseRetryAfterHeader is like ParseRetryAfter but reads the wait an
// answer's header asks for, as idem does for every answer: the longest
// of its usable Retry-After fields (a proxy may add one), or, when none
// is usable, the Retry-After-Ms field (OpenAI's and Azure OpenAI's, in
// milliseconds, with an optional fraction, rounded up). Delta-seconds a
// proxy folded into one line ("5, 10") count each. An HTTP-date is
// judged against the answer's Date, both read on the server's clock, so
// that ours running minutes behind or ahead of it neither stretches the
// wait nor cuts it to nothing; without a Date that parses, against now.
// A Date more than a day from now means one of the two clocks is wrong
// by days: the date is judged against both, and the shorter of the
// readings that ask for a wait is taken. h's keys are in canonical form, as
// in the header of an *http.Response. It reports false when no field
// gives a wait; the bounds are ParseRetryAfter's.
func ParseRetryAfterHeader(h http.Header, now time.Time) (time.Duration, bool) {
	vs := h["Retry-After"]
	if len(vs) == 0 && len(h["Retry-After-Ms"]) == 0 {
		return 0, false // most answers: no Date to parse
	}
	clock, far := serverClock(h, now)
	wait, ok := time.Duration(0), false
	for _, v := range vs {
		if d, vok := parseRetryAfterFar(v, clock, far); vok {
			wait, ok = max(wait, d), true
			continue
		}
		// "5, 10": a proxy folded two fields into one line, as it may
		// only for a list (RFC 9110 5.3), which Retry-After is not.
		// Only delta-seconds are split: an HTTP-date has a comma of
		// its own.
		if v = strings.TrimSpace(v); v != "" && v[0] >= '0' && v[0] <= '9' && len(v) <= maxFoldedLen {
			for part := range strings.SplitSeq(v, ",") {
				if d, vok := parseRetryAfterFar(part, clock, far); vok {
					wait, ok = max(wait, d), true
				}
			}
		}
	}
	if ok {
		return wait, true
	}
	for _, v := range h["Retry-After-Ms"] {
		if v = strings.TrimSpace(v); v != "" && len(v) <= maxRetryAfterLen {
			if d, vok := parseDecimal(v, time.Millisecond); vok {
				wait, ok = max(wait, d), true
			}
		}
	}
	return wait, ok
}

// serverClock is what an answer's times are judged against: its Date,
// the server's clock, when that reads within maxServerDateSkew of now;
// else now, and far the Date, when it parses (parseRetryAfterFar).
func serverClock(h http.Header, now time.Time) (clock, far time.Time) {
	clock = now
	if d, err := http.ParseTime(strings.TrimSpace(headerValue(h, "Date"))); err == nil {
		if d.Sub(now).Abs() <= maxServerDateSkew {
			clock = d
		} else {
			far = d
		}
	}
	return clock, far
}

// parseRetryAfterFar is parseRetryAfter against clock, and, when far is
// set (an answer's Date days from our clock), against far too: the
// shorter of the two readings that ask for a wait. One of the two clocks
// is wrong by days, and which one no answer tells: ours stepped by an
// operator's mistake, or a server's that lost its time. A date on the
// server's clock read against ours then comes to no wait (ours ahead)
// or to days, the cap (ours behind), while the server asked for the
// time between its two dates; and a Date broken alone would turn a date
// on the right clock into days. Delta-seconds read the same either way.
func parseRetryAfterFar(v string, clock, far time.Time) (time.Duration, bool) {
	return readFar(func(clock time.Time) (time.Duration, bool) { return parseRetryAfter(v, clock) }, clock, far)
}

// readFar is read against clock, and, when far is set, against far too:
// the shorter of the two readings that ask for a wait
// (parseRetryAfterFar).
func readFar(read func(clock time.Time) (time.Duration, bool), clock, far time.Time) (time.Duration, bool) {
	d, ok := read(clock)
	if !ok || far.IsZero() {
		return d, ok
	}
	if f, _ := read(far); f > 0 && (d == 0 || f < d) {
		d = f
	}
	return d, true
}

// rateLimitResets are the fields in which servers that send no
// Retry-After with their 429 say when the quota resets, each with the
// field that says how much of it remains: draft-ietf-httpapi-ratelimit-
// headers (up to its -06) and the X- forms before it (GitHub's
// x-ratelimit-reset in epoch seconds, Envoy's in seconds to the reset,
// X's x-rate-limit-reset). Canonical keys.
var rateLimitResets = [...]struct{ reset, remaining string }{
	{"Ratelimit-Reset", "Ratelimit-Remaining"},
	{"X-Ratelimit-Reset", "X-Ratelimit-Remaining"},
	{"X-Rate-Limit-Reset", "X-Rate-Limit-Remaining"},
}

// minEpochReset is where a reset's number reads as a time, in Unix
// seconds (2001-09-09), not as seconds to wait: nobody means 31 years.
const minEpochReset = 1_000_000_000

// minMilliReset is where a reset's number reads as Unix milliseconds, as
// JavaScript's Date.now() gives them (2001-09-09 again): in seconds, a
// time past the year 33658.
const minMilliReset = 1_000_000_000_000

// maxEpochReset bounds a reset read as a time: about the year 36812, a
// wait past maxWait however the clocks read.
const maxEpochReset = 1 << 40

// rateLimitReset reads the wait a 429 without a usable Retry-After asks
// for in rate-limit fields (rateLimitResets, and the draft's later
// RateLimit field, whose items carry the seconds to the reset in t and
// what remains in r): the longest of the resets whose quota is not said
// to have some left. A reset may be seconds to wait (as Retry-After's,
// a fraction allowed), Unix epoch seconds (GitHub's: "you should not
// make another request until after the time specified by the
// x-ratelimit-reset header") or milliseconds, or an HTTP-date; a time is judged on the
// server's clock as Retry-After's HTTP-date is. Such fields come with
// every answer of these servers, a 2xx's too: only a 429's say to wait.
func rateLimitReset(h http.Header, now time.Time) (time.Duration, bool) {
	clock, far := serverClock(h, now)
	wait, ok := time.Duration(0), false
	take := func(v string) {
		if d, vok := parseReset(v, clock, far); vok {
			wait, ok = max(wait, d), true
		}
	}
	for _, f := range rateLimitResets {
		if n, err := strconv.Atoi(strings.TrimSpace(headerValue(h, f.remaining))); err == nil && n > 0 {
			continue // another limit refused it, not this one
		}
		for _, v := range h[f.reset] {
			take(v)
		}
	}
	for _, v := range h["Ratelimit"] {
		if len(v) > maxFoldedLen {
			continue
		}
		// The draft's -07 form is one dictionary for the whole field
		// ("limit=100, remaining=40, reset=50"): its remaining speaks
		// for its reset, though each is a member of its own. Later
		// forms name a policy per item ("hour";r=0;t=50).
		var fieldReset string
		fieldLeft := false
		for item := range strings.SplitSeq(v, ",") {
			var reset string
			left, member, first := false, false, true
			for param := range strings.SplitSeq(item, ";") {
				name, val, named := strings.Cut(strings.TrimSpace(param), "=")
				if first {
					member, first = named, false
				}
				switch name {
				case "t", "reset":
					reset = val
				case "r", "remaining":
					n, err := strconv.Atoi(strings.TrimSpace(val))
					left = err == nil && n > 0
				}
			}
			if member {
				fieldReset, fieldLeft = cmp.Or(reset, fieldReset), fieldLeft || left
			} else if reset != "" && !left {
				take(reset)
			}
		}
		if fieldReset != "" && !fieldLeft {
			take(fieldReset)
		}
	}
	return wait, ok
}

// parseReset reads a rate limit's reset (rateLimitReset): seconds to
// wait, epoch seconds or milliseconds, or an HTTP-date.
func parseReset(v string, clock, far time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	whole, frac, _ := strings.Cut(v, ".")
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || n < minEpochReset || len(v) > maxRetryAfterLen || !allDigits(whole) || frac != "" && !allDigits(frac) {
		return parseRetryAfterFar(v, clock, far)
	}
	at, unit := time.Unix(min(n, maxEpochReset), 0), time.Second // time.Unix overflows past it
	if n >= minMilliReset {
		at, unit = time.UnixMilli(n), time.Millisecond
	}
	if strings.Trim(frac, "0") != "" {
		at = at.Add(unit) // never shorter than asked
	}
	return readFar(func(clock time.Time) (time.Duration, bool) { return min(max(at.Sub(clock), 0), maxWait), true }, clock, far)
}

// parseRetryAfter is ParseRetryAfter, with an HTTP-date judged against
// clock: our clock, or the server's as its Date reads.
func parseRetryAfter(v string, clock time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > maxRetryAfterLen {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		return parseDecimal(v, time.Second)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(clock) // saturates rather than overflows
	if d < 0 {
		return 0, true
	}
	return min(d, maxWait), true
}

// parseDecimal reads v, digits with an optional fraction ("2", "1.5"),
// as a number of units (a second or a millisecond): the fraction is
// rounded up to a whole millisecond, the whole saturates at maxWait.
// strconv.ParseFloat is not used: it takes "1e9999", "NaN", "Inf",
// "0x10" and "+5", none of which a server means as a wait.
func parseDecimal(v string, unit time.Duration) (time.Duration, bool) {
	whole, frac, dot := strings.Cut(v, ".")
	if !allDigits(whole) || dot && !allDigits(frac) {
		return 0, false
	}
	n, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || n > uint64(maxWait/unit) { // only ErrRange: whole is all digits
		return maxWait, true
	}
	// The fraction in milliseconds: as many digits as a unit has
	// thousandths of a second (3 for seconds, 0 for milliseconds), the
	// rest only rounding up.
	places := 0
	for u := unit; u > time.Millisecond; u /= 10 {
		places++
	}
	var ms time.Duration
	up := false
	for i := range len(frac) {
		if i < places {
			ms = ms*10 + time.Duration(frac[i]-'0')
		} else if frac[i] != '0' {
			up = true
		}
	}
	for i := len(frac); i < places; i++ {
		ms *= 10
	}
	if up {
		ms++
	}
	return min(time.Duration(n)*unit+ms*time.Millisecond, maxWait), true
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxWait is where Retry-After saturates: far beyond any sane cap.
const maxWait = 365 * 24 * time.Hour
