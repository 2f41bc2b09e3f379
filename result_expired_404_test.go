package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Some result endpoints say a key has expired with 404 and words, not
// 410: the server has forgotten the key as surely as a 410 says, and a
// resend would be executed afresh. A plain 404 stays "not found yet".
func TestResultNotFoundExpiredIsNeverResent(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		effects    int
		review     string
	}{
		{"404 saying the key expired", `{"error":{"code":"idempotency_key_expired","message":"Idempotency key has expired"}}`, 1, idem.ReviewKeyExpired},
		{"404 saying the key is no longer stored", `{"message":"No result for this Idempotency-Key: it is no longer stored"}`, 1, idem.ReviewKeyExpired},
		// Indistinguishable from replica lag: resent within the client's
		// window, as before (the server here forgot the key early).
		{"404 naming no expiry", `{"message":"Idempotency key not found"}`, 2, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newExpiringServer(t, clock, 10*time.Minute)
			inner := srv.Config.Handler
			srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rec := httptest.NewRecorder()
				inner.ServeHTTP(rec, r)
				if rec.Code == http.StatusGone {
					w.WriteHeader(http.StatusNotFound)
					_, _ = io.WriteString(w, tt.body)
					return
				}
				for name, vals := range rec.Header() {
					w.Header()[name] = vals
				}
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
			})
			c := clientFor(t, srv.Server, clock, idem.WithResultEndpoint("/operations/{key}"))

			srv.set(true)
			_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			clock.Advance(15 * time.Minute)
			srv.set(false)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			_, effects := srv.counts("k")
			require.Equal(t, tt.effects, effects, "orders executed")
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, tt.review, op.Review)
		})
	}
}
