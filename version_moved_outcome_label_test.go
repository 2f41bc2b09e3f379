package idem_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Another writer moved Banking Circle's concurrency token
// (tokenGuarded, docs.bankingcircleconnect.com/guides/concurrency-handling)
// before our update's first attempt: 412, and the result endpoint finds
// no update under k. What settles or flags it is a version conflict, and
// each attempt's outcome in the log says so; it said the order was paid
// ("order_paid_not_found", "order_paid_key_expired"), sending an operator
// who reads it after a payment no one made. Past the read path's lag it
// fails, saying the resource changed; past the key window (a result
// host down that long, modelled by the clock) it is for a person, the
// key expired; neither says an order was paid. One PUT, nothing applied.
func TestVersionMovedSettledByTheResultEndpointIsLoggedAsAVersionConflict(t *testing.T) {
	for name, tt := range map[string]struct {
		wait    time.Duration
		outcome string
		state   idem.State
		review  string
	}{
		"not found past the lag":  {idem.DefaultResultLag, "version_moved_not_found", idem.StateFailed, ""},
		"past the key window too": {30 * time.Minute, "version_moved_key_expired", idem.StateUnknown, idem.ReviewKeyExpired},
	} {
		t.Run(name, func(t *testing.T) {
			s := &tokenGuarded{token: 2}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			clock := idemtest.NewClock(epoch)
			logs := &logCapture{}
			c := clientFor(t, srv, clock, idem.WithLogger(slog.New(logs)))
			req := updateRequest(srv.URL, false)
			req.ResultURL = srv.URL + "/api/v1/payments/by-key/k"
			_, err := c.Submit(t.Context(), req)
			require.NotErrorIs(t, err, idem.ErrFailed)
			op := resumeK(t, c, clock, tt.wait)
			require.Equal(t, tt.state, op.State)
			require.Equal(t, tt.review, op.Review)
			if op.Result != nil {
				require.Contains(t, op.Result.Reason, "changed since the update was built")
				require.NotContains(t, op.Result.Reason, "order")
			}
			var outcomes []string
			_, attrs := logs.find("idem: attempt")
			for _, a := range attrs {
				outcomes = append(outcomes, a["outcome"].String())
			}
			require.Equal(t, []string{"version_moved", "query_not_found", tt.outcome}, outcomes)
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 0, s.applied)
			require.Len(t, s.puts, 1, "never resent")
		})
	}
}
