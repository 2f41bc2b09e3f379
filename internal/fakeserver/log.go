package fakeserver

import "time"

// Request is one request received, as logged by the server.
type Request struct {
	Method string
	Path   string // URL path, unescaped
	Scope  string // value of the scope header
	// Key is the parsed key ("" if missing or invalid); for a query, the
	// key from the path.
	Key string
	// RawKey is the key header's value as sent; for a query, the escaped
	// path segment.
	RawKey     string
	BodySHA256 [32]byte // of the body read; zero if it was not read
	Status     int      // 0 if none was sent: the connection was dropped, or the client gave up on a held answer
	Fault      FaultKind
	At         time.Time // arrival, by the server's clock
}

// requestLog is a ring of the last MaxRequestLog requests, in arrival order.
// It is guarded by Server.mu.
type requestLog struct {
	ring  []Request
	total uint64 // requests ever logged
}

// add logs r and returns its sequence number, for update.
func (l *requestLog) add(r Request) uint64 {
	seq := l.total
	if len(l.ring) < MaxRequestLog {
		l.ring = append(l.ring, r)
	} else {
		l.ring[seq%MaxRequestLog] = r
	}
	l.total++
	return seq
}

// at returns the logged request seq, or nil if it has been overwritten.
func (l *requestLog) at(seq uint64) *Request {
	if seq >= l.total || l.total-seq > uint64(len(l.ring)) {
		return nil
	}
	return &l.ring[seq%MaxRequestLog]
}

// requests returns a copy of the log, oldest first.
func (l *requestLog) requests() []Request {
	out := make([]Request, 0, len(l.ring))
	if len(l.ring) < MaxRequestLog {
		return append(out, l.ring...)
	}
	start := l.total % MaxRequestLog
	out = append(out, l.ring[start:]...)
	return append(out, l.ring[:start]...)
}
