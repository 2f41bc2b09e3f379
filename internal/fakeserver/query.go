package fakeserver

import (
	"net/http"
	"net/url"
	"strings"
)

const operationsPrefix = "/operations/"

// query answers GET /operations/{key}.
func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	req := s.newRequest(r)
	// The key is the rest of the escaped path, so a key may hold "/" as %2F.
	raw, ok := strings.CutPrefix(r.URL.EscapedPath(), operationsPrefix)
	if !ok {
		raw = strings.TrimPrefix(r.URL.Path, operationsPrefix)
	}
	req.RawKey = raw
	key, err := url.PathUnescape(raw)
	if err != nil {
		s.rejectRequest(w, req, classQuery, http.StatusBadRequest, "invalid key in path", "")
		return
	}
	req.Key = key

	s.mu.Lock()
	gen := s.gen
	seq := s.logLocked(req, classQuery)
	now := s.cfg.Now()
	s.st.sweep(now, s.cfg.Retention)
	s.releaseLocked(now)
	f, _ := s.takeFaultLocked(key, true, outQuery, "")
	kind := f.kind
	var a answer
	if f.kind.replacesProcessing() {
		a = faultAnswer(f)
		f = applied{}
	} else if e := s.st.lookup(scopeKey{req.Scope, key}, now, s.cfg.Retention); s.cfg.Behavior.KeyMember != "" {
		a = orderQueryAnswer(e, now)
	} else if e == nil || e.hidden(now) {
		a = errorAnswer(http.StatusNotFound, "not found")
	} else {
		a.status, a.body = encodeJSON(http.StatusOK, e.result(now))
	}
	s.mu.Unlock()

	deliver(w, r, a, f, s.cfg.Now, func(status int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.finishLocked(gen, seq, status, kind)
	})
}
