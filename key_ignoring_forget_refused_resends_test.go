package idem_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// wafFront is a load balancer with a web application firewall in front of
// a fixedAfterIncident endpoint. It loses the answer to the first POST
// after passing it on (the origin charged), then its WAF blocks the
// client for a while and refuses the next three POSTs with a 403 of its
// own, never passed on, with no Idempotency-Status. FortiADC's block
// action "will drop the current attack session by HTTP 403 message and
// block the attacker (according the attacker's IP address) for 1 hour"
// (https://docs.fortinet.com/document/fortiadc/7.4.2/cli-reference/110353);
// modelled: what trips the rule, and the block lifting after three.
type wafFront struct {
	*httptest.Server
	mu    sync.Mutex
	posts int
}

func newWAFFront(t testing.TB, origin *httptest.Server) *wafFront {
	t.Helper()
	target, err := url.Parse(origin.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = origin.Client().Transport
	f := &wafFront{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.posts++
		n := f.posts
		f.mu.Unlock()
		switch {
		case n == 1:
			proxy.ServeHTTP(httptest.NewRecorder(), r)
			dropConnection(w)
		case n <= 4:
			page(w, http.StatusForbidden, http.Header{"Server": {"FortiADC"}}, `<html><title>403 Forbidden</title><body>Request blocked</body></html>`)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// Payment a's answer is lost while the endpoint ignores the key, and its
// resends are refused by the front (wafFront): a is flagged
// ReviewRefusedAfterSend, a flag that does not stop a caller's Do or
// Submit from resending. k2's answer then teaches the endpoint ignores
// the key; the provider fixes it and the operator forgets it. The forget
// flagged only unflagged operations: a, flagged already, was left, and
// the caller's Submit(a) after the forget resent it, which the fixed
// endpoint, which kept no key for a, ran again: requests a, k2, a at the
// origin; 3 charges. While the endpoint was known, that Submit would
// have flagged a ReviewKeyIgnored (resendBlock); the forget flags it so
// first: requests a, k2; 2 charges; a flagged ReviewKeyIgnored.
func TestForgetKeyIgnoringFlagsOperationsRefusedAfterSend(t *testing.T) {
	s := newFixedAfterIncident(t)
	f := newWAFFront(t, s.srv)
	c := clientFor(t, f.Server, idemtest.NewClock(epoch))
	charge := f.URL + "/api/v1/charge"
	a := idem.Request{Key: "a", URL: charge, Body: []byte(`{"amount":100}`)}

	res, err := c.Submit(t.Context(), a)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(a): answer lost, resends refused")
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review, "Submit(a): Review")
	_, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err, "Submit(k2): its answer says the key is ignored")
	s.fix()
	known, err := c.ForgetKeyIgnoring(t.Context(), "POST "+charge)
	require.NoError(t, err, "ForgetKeyIgnoring()")
	require.True(t, known, "ForgetKeyIgnoring(): known")

	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "a")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, rec.Review, "journal: a's Review after ForgetKeyIgnoring()")
	res, err = c.Submit(t.Context(), a)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(a) after the forget")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review, "Submit(a) after the forget: Review")
	s.requireSeen(t, []string{"a", "k2"}, 2)
	f.mu.Lock()
	require.Equal(t, 5, f.posts, "POSTs at the front: a, its three refused resends, k2")
	f.mu.Unlock()
}
