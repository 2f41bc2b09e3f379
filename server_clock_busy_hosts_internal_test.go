package idem

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// TestServerClockOfProbedHostPastTheBoundAllRecent: a service calling one
// host per merchant, more than 1,024 of them heard from within the last
// minute (modelled: custom domains of one gateway; every origin behind
// net/http sends Date, RFC 9110 6.6.1), restarts and resends an order an
// earlier process left at a new tenant's host. None of the 1,024 may go
// (each within twice the key window), so the HEAD probing the new host's
// clock had its Date thrown away: the resend behind it was judged by our
// clock alone, no guard against ours stepped back. A host whose probe is
// under way, or has ended, is kept past the bound, up to twice it; one
// merely answering is not, as before.
func TestServerClockOfProbedHostPastTheBoundAllRecent(t *testing.T) {
	var heads, others atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			heads.Add(1)
		} else {
			others.Add(1)
		}
		w.WriteHeader(http.StatusMethodNotAllowed) // with net/http's Date
	}))
	t.Cleanup(srv.Close)
	c, clk := newMerchantsClient(t, srv)
	s := &c.clocks
	date := func(at time.Time) string { return at.UTC().Format(http.TimeFormat) }

	t0 := clk.Now()
	for i := range maxServerClocks {
		s.learn(fmt.Sprintf("shop-%04d.example", i), date(t0), t0)
	}
	clk.pass(time.Minute)

	const tenant = "tenant-new.example"
	if first, _ := s.firstProbe(tenant, clk.Now()); !first {
		t.Fatal("the new host got no probe")
	}
	u, err := url.Parse("http://" + tenant + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	if end := c.headProbe(t.Context(), u, false); end != probeAnswered {
		t.Fatalf("probe ended %v; want answered", end)
	}
	s.probed(tenant, true)
	if heads.Load() != 1 || others.Load() != 0 {
		t.Fatalf("%d HEADs and %d other requests; want the one HEAD", heads.Load(), others.Load())
	}
	if _, ok := s.now(tenant, clk.Now()); !ok {
		t.Fatalf("the probed host's Date was thrown away past %d recent hosts", maxServerClocks)
	}

	// An answer from a host no resend asked about is still not kept.
	now := clk.Now()
	s.learn("unasked.example", date(now), now)
	if _, ok := s.now("unasked.example", now); ok {
		t.Error("a host never probed kept past the bound")
	}

	// Probed hosts past the bound: kept up to twice it, never more.
	kept := 0
	for i := range 2 * maxServerClocks {
		h := fmt.Sprint("probed-", i)
		if first, _ := s.firstProbe(h, now); !first {
			t.Fatalf("firstProbe(%s): no probe", h)
		}
		s.learn(h, date(now), now)
		s.probed(h, true)
		if _, ok := s.now(h, now); ok {
			kept++
		}
	}
	if n := len(s.hosts); n != 2*maxServerClocks {
		t.Errorf("%d hosts kept; want %d", n, 2*maxServerClocks)
	}
	if want := maxServerClocks - 1; kept != want {
		t.Errorf("%d probed hosts kept; want %d", kept, want)
	}
	if n := len(s.probes); n > maxServerClocks {
		t.Errorf("%d probes kept; want at most %d", n, maxServerClocks)
	}
}
