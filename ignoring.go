package idem

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idem/journal"
)

// maxIgnoringEndpoints bounds the endpoints a Client remembers as ignoring
// the key: paths may hold ids, and what is past the bound is only as
// protected as an operation's own answers make it.
const maxIgnoringEndpoints = 1024

// keyIgnoring is the endpoints (method, URL without its query) whose
// answers said the server does not de-duplicate by the key there
// (Idempotency-Status: ignored). Whether an endpoint supports idempotency
// is the endpoint's, not the request's (Solidgate: "Idempotency support
// varies by endpoint"): another operation to it whose answer is lost may
// have executed, and a resend would execute again, though no answer of
// its own said so. Remembered for the process's life only (the journal
// has no place for it). The zero value is empty and ready to use.
type keyIgnoring struct {
	any atomic.Bool // an endpoint is known: the submit's path reads only this while none is
	mu  sync.Mutex
	set map[string]struct{}
}

// endpoint names rec's endpoint as keyIgnoring keys it.
func endpoint(rec *journal.Record) string {
	u, _, _ := strings.Cut(rec.URL, "?")
	u, _, _ = strings.Cut(u, "#")
	return rec.Method + " " + u
}

// has reports whether rec's endpoint is known to ignore the key.
func (k *keyIgnoring) has(rec *journal.Record) bool {
	if !k.any.Load() {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.set[endpoint(rec)]
	return ok
}

// add remembers that rec's endpoint ignores the key.
func (k *keyIgnoring) add(rec *journal.Record) {
	e := endpoint(rec)
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.set[e]; ok || len(k.set) >= maxIgnoringEndpoints {
		return
	}
	if k.set == nil {
		k.set = make(map[string]struct{})
	}
	k.set[e] = struct{}{}
	k.any.Store(true)
}

// relearn remembers rec's endpoint if rec was flagged for ignoring the key
// (ReviewKeyIgnored): what the process that flagged it knew died with it,
// and another operation there whose answer was lost must not be resent.
func (k *keyIgnoring) relearn(rec *journal.Record) {
	if rec.Review == ReviewKeyIgnored {
		k.add(rec)
	}
}
