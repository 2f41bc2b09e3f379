package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/idemtest"
)

// orderAPI is a payment API modelled by a test: it takes one order per
// Idempotency-Key, and its result endpoint (GET /operations/{key}) knows
// only the orders it took. While refuse (given the shared clock's time)
// says so, it takes none: refuse has written the answer.
type orderAPI struct {
	srv    *httptest.Server
	clock  *idemtest.Clock
	refuse func(now time.Time, w http.ResponseWriter) bool

	mu      sync.Mutex
	submits int            // submits received
	refused int            // submits refused
	orders  map[string]int // key → orders taken
}

func newOrderAPI(t *testing.T, clock *idemtest.Clock, refuse func(time.Time, http.ResponseWriter) bool) *orderAPI {
	t.Helper()
	s := &orderAPI{clock: clock, refuse: refuse, orders: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			key := strings.TrimPrefix(r.URL.Path, "/operations/")
			if s.orders[key] == 0 {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"error":"no such operation"}`)
				return
			}
			_, _ = fmt.Fprintf(w, `{"id":"ord_%s","state":"succeeded"}`, key)
			return
		}
		s.submits++
		if s.refuse(s.clock.Now(), w) {
			s.refused++
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if s.orders[key] == 0 {
			s.orders[key]++
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"ord_%s"}`, key)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// counts returns the submits refused and the orders taken, per key.
func (s *orderAPI) counts() (refused int, orders map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	orders = make(map[string]int, len(s.orders))
	for k, v := range s.orders {
		orders[k] = v
	}
	return s.refused, orders
}

// received returns the submits received.
func (s *orderAPI) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.submits
}
