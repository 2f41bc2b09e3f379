package idem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// endAfterPost ends its caller's ctx once a POST is answered: a caller
// that gives up after the first answer.
type endAfterPost struct {
	base http.RoundTripper
	end  context.CancelFunc
}

func (e endAfterPost) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.base.RoundTrip(r)
	if r.Method == http.MethodPost {
		e.end()
	}
	return resp, err
}

// Stripe refuses a key used with other parameters with a 400
// idempotency_error (docs.stripe.com/api/idempotent_requests): Do's error
// is ErrKeyConflict with ErrFailed, an earlier request under the key, not
// ours, may have paid. Settled in the background (a 429 first, the caller
// gone, Resume's resend refused), the settle func's Result said only
// "failed", as Lookup's did: a service recorded the order refused and its
// customer paid again. Result.KeyConflict now says it wherever the Client
// hands out that Result, exactly when the call's error does.
func TestSettledKeyConflictResultSaysSoWhereverHandedOut(t *testing.T) {
	const otherParameters = `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters ` +
		`they were first used with. Try using a key other than 'order-42' if you meant to execute a different request."}}`
	const declined = `{"error":{"type":"card_error","code":"card_declined","message":"Your card was declined."}}`
	for _, tc := range []struct {
		name        string
		status      int
		body        string
		keyConflict bool
	}{
		{"400 keys only with the same parameters", http.StatusBadRequest, otherParameters, true},
		{"402 card declined", http.StatusPaymentRequired, declined, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				if r.Method != http.MethodPost {
					w.WriteHeader(http.StatusMethodNotAllowed)
					return
				}
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				n := len(keys)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if n == 1 {
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = io.WriteString(w, `{"error":{"code":"rate_limit","type":"invalid_request_error","message":"Too many requests hit the API too quickly."}}`)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			callCtx, end := context.WithCancel(t.Context())
			defer end()
			var settleFunc, settleHook []*idem.Result
			c := journaledClient(t,
				idem.WithHTTPClient(&http.Client{Transport: endAfterPost{base: srv.Client().Transport, end: end}}),
				idem.WithHooks(idem.Hooks{Settle: func(_ context.Context, res *idem.Result) { settleHook = append(settleHook, res) }}),
				idem.WithSettleFunc(func(res *idem.Result) { settleFunc = append(settleFunc, res) }))
			req := idem.Request{Key: "order-42", URL: srv.URL + "/v1/payment_intents",
				Body: []byte(`{"amount":700,"metadata":{"order":"42"}}`)}

			_, err := c.Submit(callCtx, req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit(): 429, then the caller gone")
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, 1, sum.Failed, "Resume: the resend refused")

			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrFailed, "Submit() again")
			require.Equal(t, tc.keyConflict, errors.Is(err, idem.ErrKeyConflict), "Submit() again: %v", err)
			require.Equal(t, tc.keyConflict, res.KeyConflict, "Submit()'s Result")
			require.Len(t, settleFunc, 1, "settle func calls")
			require.Equal(t, tc.keyConflict, settleFunc[0].KeyConflict, "the settle func's Result")
			require.Len(t, settleHook, 1, "Settle hook calls")
			require.Equal(t, tc.keyConflict, settleHook[0].KeyConflict, "the Settle hook's Result")
			op, err := c.Lookup(t.Context(), "", "order-42")
			require.NoError(t, err)
			require.Equal(t, idem.StateFailed, op.State)
			require.Equal(t, tc.keyConflict, op.Result.KeyConflict, "Lookup's Result")
			res, err = c.Do(t.Context(), op)
			require.ErrorIs(t, err, idem.ErrFailed, "Do()")
			require.Equal(t, tc.keyConflict, errors.Is(err, idem.ErrKeyConflict), "Do(): %v", err)
			require.Equal(t, tc.keyConflict, res.KeyConflict, "Do()'s Result")
			ops, err := c.List(t.Context(), idem.Filter{})
			require.NoError(t, err)
			require.Len(t, ops, 1)
			require.Equal(t, tc.keyConflict, ops[0].Result.KeyConflict, "List's Result")

			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, []string{"order-42", "order-42"}, keys, "sends, each with the key")
		})
	}
}
