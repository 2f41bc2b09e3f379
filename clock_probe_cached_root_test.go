package idem_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cdnRoot is an order API under a CDN that routes by path: /orders goes to
// the API, whose HEAD there runs the slow listing (slowListing), and the
// host's root, the marketing page, is served from the edge's copy, stored
// at stored, whatever the request's Cache-Control says. CDNs ignore a
// request's no-cache by default (Fastly, "Testing HTTP freshness in
// CDNs": request Cache-Control is among the controls they ignore;
// Cloudflare and CloudFront serve a HIT to it alike); the copy keeps the
// origin's Date of then and says how old it is in Age (RFC 9111 4, 5.1).
type cdnRoot struct {
	base   http.RoundTripper
	now    func() time.Time // the edge's clock, right
	stored time.Time

	mu    sync.Mutex
	heads []string
	hits  int
}

func (c *cdnRoot) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodHead {
		return c.base.RoundTrip(r)
	}
	c.mu.Lock()
	c.heads = append(c.heads, r.URL.Path)
	c.mu.Unlock()
	if r.URL.Path != "/" {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	c.mu.Lock()
	c.hits++
	c.mu.Unlock()
	h := http.Header{"Date": {c.stored.UTC().Format(http.TimeFormat)},
		"Age":           {strconv.Itoa(int(c.now().Sub(c.stored).Seconds()))},
		"Cache-Control": {"public, max-age=86400"}, "Content-Type": {"text/html"}}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Request: r}, nil
}

// A process restarted with its clock an hour behind (steppedBackHour: by
// it the keys are 10 minutes old; the server forgot them 50 minutes ago)
// runs Run on 40 orders to a host whose HEAD on /orders times out, and whose
// root is a landing page a CDN stored two hours ago (cdnRoot). The root's
// probe was answered from the copy, its Date two hours behind the
// server's clock: learnt as the host's clock, it read behind ours, every
// key looked fresh, and each resend was a second order on a forgotten key
// (before the root was asked, the resends waited). The copy's Age is the
// time since that Date (RFC 9111 4.2.3): Date plus Age reads the host's
// clock now, which says every key is past the window. Default settings
// but the clock.
func TestClockProbeAnsweredFromACachedRootCountsItsAge(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	var network *cdnRoot
	clock, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
		network = &cdnRoot{base: base}
		return network
	})
	network.now, network.stored = clock.Now, clock.Now().Add(-2*time.Hour)

	runFlagsEveryKey(t, clock, c, srv, store, keys, 0)
	network.mu.Lock()
	defer network.mu.Unlock()
	require.Equal(t, []string{"/orders", "/"}, network.heads, "clock probes: the path's, timed out, then the root's")
	require.Equal(t, 1, network.hits, "root HEADs the edge answered from its copy")
}
