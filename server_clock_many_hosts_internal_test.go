package idem

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestServerClockOfNewHostPastTheBound: a service calling one host per
// merchant for months, each merchant's host a custom domain of one
// gateway (modelled: every origin behind net/http sends Date, RFC 9110
// 6.6.1). 1,024 merchants' hosts were heard from over an hour ago and
// never since; a new tenant's order, sent at default settings, must have
// its host's clock learnt and, once that host is forgotten in turn, the
// host probed, or a resend of an order an earlier process left there
// goes unjudged by the host's clock (resendBlock). Before: the new host
// learnt nothing and got no probe, for the 1,024 were kept for ever.
func TestServerClockOfNewHostPastTheBound(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1","status":"created"}`))
	}))
	t.Cleanup(srv.Close)
	c, clk := newMerchantsClient(t, srv)

	old := clk.Now()
	for i := range maxServerClocks {
		h := fmt.Sprintf("shop-%04d.example", i)
		c.clocks.learn(h, old.UTC().Format(http.TimeFormat), old)
		if first, _ := c.clocks.firstProbe(h, old); !first {
			t.Fatalf("host %d: no probe", i)
		}
		c.clocks.probed(h, true)
	}
	clk.pass(time.Hour)

	const tenant = "tenant-new.example"
	op, err := c.Prepare(t.Context(), Request{Key: "order-new", URL: "http://" + tenant + "/orders", Body: []byte(`{"amount":100}`)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(t.Context(), op)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateSucceeded || posts.Load() != 1 {
		t.Fatalf("state %v after %d POSTs; want succeeded after 1", res.State, posts.Load())
	}
	if _, ok := c.clocks.now(tenant, clk.Now()); !ok {
		t.Errorf("the new host's clock was not learnt past %d hosts", maxServerClocks)
	}
	if n := len(c.clocks.hosts); n > maxServerClocks {
		t.Errorf("%d hosts kept; want at most %d", n, maxServerClocks)
	}
	const other = "tenant-other.example"
	if first, wait := c.clocks.firstProbe(other, clk.Now()); !first || wait != nil {
		t.Errorf("firstProbe(new host) = %v, %v; want the probe", first, wait)
	}
	if n := len(c.clocks.probes); n > maxServerClocks {
		t.Errorf("%d probes kept; want at most %d", n, maxServerClocks)
	}
}

// TestServerClockKeepsHostsStillJudgedByIt: past the bound, a new host
// takes the place of one least recently used, never of one a send of
// ours went to within twice the longest key window (default 20 min):
// a resend of it is judged by that host's gains (a VM paused since the
// send), which its earlier answers' offsets hold; nor of one whose probe
// is under way, whose resends wait on it; and a new host's probe takes
// the place of the probe least recently asked for that is over, never
// of one under way.
func TestServerClockKeepsHostsStillJudgedByIt(t *testing.T) {
	c, clk := newMerchantsClient(t, nil)
	s := &c.clocks
	t0 := clk.Now()
	date := func(at time.Time) string { return at.UTC().Format(http.TimeFormat) }
	host := func(i int) string { return fmt.Sprintf("shop-%04d.example", i) }
	for i := range maxServerClocks {
		s.learn(host(i), date(t0), t0)
	}
	const sentTo, probing = 0, 1
	s.sending(host(sentTo), t0.Add(50*time.Minute))
	if first, _ := s.firstProbe(host(probing), t0); !first {
		t.Fatal("no probe")
	}

	s.learn("early.example", date(t0.Add(30*time.Minute)), t0.Add(30*time.Minute))
	if _, ok := s.now("early.example", t0.Add(30*time.Minute)); ok {
		t.Error("a host evicted 30 min after its last answer, within twice the default key window")
	}
	later := t0.Add(time.Hour)
	for i := range maxServerClocks {
		s.learn(fmt.Sprint("new-", i), date(later), later)
	}
	learnt := 0
	for i := range maxServerClocks {
		if _, ok := s.now(fmt.Sprint("new-", i), later); ok {
			learnt++
		}
	}
	if learnt != maxServerClocks-2 {
		t.Errorf("%d new hosts learnt; want %d", learnt, maxServerClocks-2)
	}
	for _, i := range []int{sentTo, probing} {
		if _, ok := s.now(host(i), later); !ok {
			t.Errorf("host %s forgotten", host(i))
		}
	}

	// Probes: every slot under way, a new host gets none; once all but
	// one are over, new hosts take the over ones' places, the oldest
	// asked first, never the one under way.
	*s = serverClocks{keep: s.keep}
	for i := range maxServerClocks {
		s.firstProbe(host(i), t0.Add(time.Duration(i)*time.Second))
	}
	if first, wait := s.firstProbe("new", later); first || wait != nil {
		t.Fatalf("firstProbe() with every probe under way = %v, %v; want neither", first, wait)
	}
	for i := 1; i < maxServerClocks; i++ {
		s.probed(host(i), true)
	}
	if first, _ := s.firstProbe("new", later); !first {
		t.Fatal("firstProbe(new host) past the bound: no probe")
	}
	if _, ok := s.probes[host(1)]; ok {
		t.Error("the probe least recently asked for that is over was kept")
	}
	for i := range maxServerClocks - 2 {
		if first, _ := s.firstProbe(fmt.Sprint("new-", i), later); !first {
			t.Fatalf("firstProbe(new-%d) past the bound: no probe", i)
		}
	}
	if first, wait := s.firstProbe(host(0), later); first || wait == nil {
		t.Errorf("firstProbe() behind the probe under way = %v, %v; want a wait", first, wait)
	}
	if len(s.probes) != maxServerClocks {
		t.Errorf("%d probes kept; want %d", len(s.probes), maxServerClocks)
	}
}
