package idem

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idem/journal"
)

// maxHeardEndpoints bounds the endpoints a Client remembers as heard
// from: paths may hold ids. Past the bound a first send goes out once,
// which costs at most a status query.
const maxHeardEndpoints = maxIgnoringEndpoints

// endpointKey names an endpoint as endpoint does, in two parts: looked
// up without the joined string, which would cost each send an
// allocation.
type endpointKey struct{ method, url string }

func endpointKeyOf(rec *journal.Record) endpointKey {
	u, _, _ := strings.Cut(rec.URL, "?")
	u, _, _ = strings.Cut(u, "#")
	return endpointKey{rec.Method, u}
}

// heardEndpoints is the endpoints (method, URL without its query) an
// answer not saying Idempotency-Status: ignored has come from since the
// Client began. An endpoint that ignores the key says so only in its
// answers (Solidgate: "check the Idempotency-Status value. A value of
// ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests): until one
// has come, a submit there goes out once (submit), or net/http's own
// resend of it (which it makes of a request with an Idempotency-Key
// header) is a second order nobody sees: on a dead reused connection,
// both answers lost, the result query finds the key's last order and
// settles it; after an HTTP/2 stream reset PROTOCOL_ERROR, the copy's
// answer settles the operation as if it had gone out once. A stream the
// server refused is then a lost answer too, judged by idem under the
// same key. Once heard, the endpoint de-duplicates as most do, and
// net/http's resend, which spares a query (and, for a stream refused
// under a server's stream limit, an attempt), is let be. The zero value
// is empty and ready to use.
type heardEndpoints struct {
	// set is never changed once stored (add copies it): a send reads it
	// with no lock. Adds are a few per endpoint, bounded.
	set atomic.Pointer[map[endpointKey]struct{}]
	mu  sync.Mutex // serializes add
}

// has reports whether rec's endpoint has been heard from.
func (h *heardEndpoints) has(rec *journal.Record) bool {
	set := h.set.Load()
	if set == nil {
		return false
	}
	_, ok := (*set)[endpointKeyOf(rec)]
	return ok
}

// add remembers that an answer of rec's endpoint not saying it ignores
// the key came.
func (h *heardEndpoints) add(rec *journal.Record) {
	if h.has(rec) {
		return
	}
	e := endpointKeyOf(rec)
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.set.Load()
	n := 0
	if old != nil {
		if _, ok := (*old)[e]; ok {
			return
		}
		n = len(*old)
	}
	if n >= maxHeardEndpoints {
		return
	}
	set := make(map[endpointKey]struct{}, n+1)
	if old != nil {
		for k := range *old {
			set[k] = struct{}{}
		}
	}
	// Cloned: the key must not hold the record's URL, a substring of
	// whatever string it came in, for the Client's life.
	set[endpointKey{e.method, strings.Clone(e.url)}] = struct{}{}
	h.set.Store(&set)
}

// heardFrom reports whether an answer of status is surely the endpoint's
// own, so that its not saying it ignores the key says it reads it: a
// 2xx. A gateway or a front answers a 5xx, 408, 429, 401, 403 or 404 of
// its own, without the endpoint's headers; until a 2xx comes, sends go
// out once, which is safe.
func heardFrom(status int) bool {
	return status >= 200 && status < 300
}
