package idem_test

import (
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestOptionsRefuseWhatWouldBreakEveryCall: an option whose value would
// panic after an operation is journaled, silently turn retries off, or
// keep every key off the wire fails New with a message naming the option.
func TestOptionsRefuseWhatWouldBreakEveryCall(t *testing.T) {
	e := newEnv(t)
	bad := map[string]idem.Option{
		// The loop called NextBackOff on the nil policy: a panic in the
		// caller's goroutine, with the operation journaled.
		"backoff constructor returns nil": idem.WithBackoff(func() backoff.BackOff { return nil }),
		// Inf > Inf/2 and NaN > NaN/2 are false: no retry was ever allowed.
		"budget +Inf tokens": idem.WithRetryBudget(math.Inf(1), 0.1),
		"budget NaN tokens":  idem.WithRetryBudget(math.NaN(), 0.1),
		// A NaN refund poisons the bucket after the first success.
		"budget NaN ratio": idem.WithRetryBudget(100, math.NaN()),
		// net/http sends none of these as set: the key never arrives.
		"key header Host":              idem.WithKeyHeader("Host", idem.KeyBare),
		"key header Content-Length":    idem.WithKeyHeader("content-length", idem.KeyBare),
		"key header Transfer-Encoding": idem.WithKeyHeader("Transfer-Encoding", idem.KeyBare),
		"key header Connection":        idem.WithKeyHeader("Connection", idem.KeyBare),
		// A bare number is nanoseconds: WithAttemptTimeout(10) failed every
		// attempt before sending, so every operation stayed journaled, unsent.
		"attempt timeout a bare 10": idem.WithAttemptTimeout(10),
		"max elapsed a bare 60":     idem.WithMaxElapsed(60),
		"key window a bare 24":      idem.WithKeyRetention(24),
		"reconcile bare numbers":    idem.WithReconcile(30, 3600, 72),
		// A lag never over would flag every order not found at the key
		// window; a negative one, or nanoseconds, resends at once a
		// "not found" that a lagging read path answers.
		"result lag a bare 120": idem.WithResultLag(120),
		"result lag negative":   idem.WithResultLag(-time.Minute),
		"result lag a year":     idem.WithResultLag(365 * 24 * time.Hour),
		// The same through the user's client: each attempt timed out before
		// a trace event, read as "maybe sent", and was queried as such.
		"http client Timeout a bare 5": idem.WithHTTPClient(&http.Client{Timeout: 5}),
		// Each Prepare refused these, blaming a ResultURL the caller never set.
		"result endpoint with a password": idem.WithResultEndpoint("https://u:p@api.example.com/ops/{key}"),
		"result endpoint ftp":             idem.WithResultEndpoint("ftp://api.example.com/ops/{key}"),
		"result endpoint port":            idem.WithResultEndpoint("https://api.example.com:99999/ops/{key}"),
	}
	want := map[string]string{
		"backoff constructor returns nil": "WithBackoff",
		"budget +Inf tokens":              "WithRetryBudget",
		"budget NaN tokens":               "WithRetryBudget",
		"budget NaN ratio":                "WithRetryBudget",
		"key header Host":                 "WithKeyHeader",
		"key header Content-Length":       "WithKeyHeader",
		"key header Transfer-Encoding":    "WithKeyHeader",
		"key header Connection":           "WithKeyHeader",
		"attempt timeout a bare 10":       "time.Second",
		"max elapsed a bare 60":           "WithMaxElapsed",
		"key window a bare 24":            "WithKeyRetention",
		"reconcile bare numbers":          "WithReconcile",
		"result lag a bare 120":           "WithResultLag",
		"result lag negative":             "WithResultLag",
		"result lag a year":               "WithResultLag",
		"http client Timeout a bare 5":    "WithHTTPClient",
		"result endpoint with a password": "WithResultEndpoint",
		"result endpoint ftp":             "WithResultEndpoint",
		"result endpoint port":            "WithResultEndpoint",
	}
	for name, o := range bad {
		t.Run(name, func(t *testing.T) {
			c, err := idem.New(e.replica(), o)
			require.ErrorContains(t, err, want[name])
			require.Nil(t, c)
		})
	}
}

// TestBackoffPolicyNilLaterHandsOff: a policy constructor that passes New's
// check and returns nil later ends the call with ErrUnknownOutcome, the
// operation journaled for the reconciler, rather than a panic.
func TestBackoffPolicyNilLaterHandsOff(t *testing.T) {
	var started atomic.Bool // set before the first call; New's check runs before it
	e := newEnv(t, clientOpts(idem.WithBackoff(func() backoff.BackOff {
		if !started.Load() {
			return &backoff.ZeroBackOff{}
		}
		return nil
	})))
	started.Store(true)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "nil-policy"}))
	res, err := e.client.Submit(e.ctx, e.req("nil-policy", `{"amount":5}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.StateUnknown, e.record("nil-policy").State)
}
