package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// storingGateway is an idempotency layer in front of an API that answers
// its own failures 200 OK in an envelope: it keeps every 2xx by key and
// replays it, "byte-for-byte identical to the original — including the
// status code", marked "Idempotent-Replayed: true"
// (docs.whop.com/developer/api/idempotency; "only successes are
// replayed", docs.ripple.com/products/collections/guides/idempotency:
// a 200 is one to it, whatever its envelope says). The first request
// does the work, the API then fails and says so in its envelope (fault),
// and that answer is lost on the way back.
type storingGateway struct {
	fault string

	mu     sync.Mutex
	keys   []string
	made   int
	stored map[string]string
}

func (g *storingGateway) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	g.mu.Lock()
	g.keys = append(g.keys, key)
	body, seen := g.stored[key]
	if !seen {
		g.made++
		g.stored[key] = g.fault
	}
	g.mu.Unlock()
	if !seen {
		dropConnection(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Idempotent-Replayed", "true")
	_, _ = io.WriteString(w, body)
}

// A server's failure in a 2xx envelope (Kraken's "EGeneral:Internal
// error", Shopify's INTERNAL_SERVER_ERROR) may follow the work done, and
// is no outcome to a fresh answer; replayed as the key's stored answer
// it is the same failure, and it was settled failed: after a first
// attempt whose answer was lost, the one that did the work, the caller
// was told "failed" and made the order or refund again. A stored 5xx
// is left for a person; so is this, the work made once.
func TestReplayedEnvelopeFaultIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fault  string
		decode idem.Decoder
	}{
		{name: "kraken internal error", fault: `{"error":["EGeneral:Internal error"],"result":{}}`, decode: decodeKraken},
		{name: "graphql internal error", fault: shopifyInternal, decode: decodeErrorsFail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &storingGateway{fault: tt.fault, stored: map[string]string{}}
			srv := httptest.NewServer(http.HandlerFunc(g.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithDecoder(tt.decode))
			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/orders",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"pair":"XBTUSD","volume":"0.01"}`)})
			require.NotErrorIs(t, err, idem.ErrFailed, "the work done read as failed")
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.StateUnknown, res.State)
			require.True(t, strings.HasPrefix(res.Review, idem.ReviewFinalAnswer), "review %q", res.Review)
			g.mu.Lock()
			defer g.mu.Unlock()
			require.Equal(t, 1, g.made, "work done")
			require.Equal(t, []string{"ord-9", "ord-9"}, g.keys, "the lost first attempt and its resend, one key")
		})
	}
}
