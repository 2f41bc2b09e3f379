package crashtest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
)

// TestMatrixSettlesAResendTheMachineCutShort is the matrix's row on a
// machine too loaded to answer within the attempt timeout (seen once on
// 2 CPUs at load 17 with -race): the order API's resend after the
// restart is written and gets no answer, so that its order may exist
// while the result endpoint's "not found" may still lag behind it, and
// idem rightly leaves it unknown. Another Resume past the lag settles
// it: one order, succeeded, nothing lost.
func TestMatrixSettlesAResendTheMachineCutShort(t *testing.T) {
	// Takes the bytes of the request it holds and answers nothing until
	// the client gives up on it, as a server too slow for the attempt
	// timeout; nothing reaches the order API.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // read whole, the server sees the client hang up
		<-r.Context().Done()
	}))
	defer slow.Close()

	b := idemtest.ClientOrderID()
	b.OpenOnly = true
	sc := errorBeforeCommitRow(t, b)
	var posts atomic.Int32
	sc.Transport = func(base http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && posts.Add(1) == 2 {
				r = r.Clone(r.Context())
				r.URL.Host, r.Host = slow.Listener.Addr().String(), ""
			}
			return base.RoundTrip(r)
		})
	}

	row, err := crashtest.RunScenario(t.Context(), sc, 1, 1, t.TempDir())
	require.NoError(t, err)
	t.Logf("%+v", row)
	require.GreaterOrEqual(t, posts.Load(), int32(3), "the resend cut short, then one that placed the order")
	require.Equal(t, 1, row.ResumedAgain, "left unknown by the resend cut short")
	require.Equal(t, 1, row.Succeeded, "settled by the next Resume")
	require.Zero(t, row.Duplicates, "orders beyond the first")
	requireRowHolds(t, row)
}

// TestMatrixResumesAgainOnlyWhatATimeoutLeft: an operation the matrix's
// Resumes left unknown although every request got an answer (here a
// result endpoint that answers 500 from the restart on) is lost to the
// row, not resumed until it settles.
func TestMatrixResumesAgainOnlyWhatATimeoutLeft(t *testing.T) {
	b := idemtest.ClientOrderID()
	b.OpenOnly = true
	sc := errorBeforeCommitRow(t, b)
	sc.Transport = func(base http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet {
				return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{},
					Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
			}
			return base.RoundTrip(r)
		})
	}

	row, err := crashtest.RunScenario(t.Context(), sc, 1, 1, t.TempDir())
	require.NoError(t, err)
	t.Logf("%+v", row)
	require.Zero(t, row.ResumedAgain, "resumed again without a timeout")
	require.Equal(t, 1, row.Lost, "left unknown after every answer")
}

// errorBeforeCommitRow returns b's error-before-commit row with every
// submit of the first process failing before the order is placed, and
// that process giving up after one: the restarted one resends it once
// the result lag has passed.
func errorBeforeCommitRow(t *testing.T, b idemtest.Behavior) crashtest.Scenario {
	t.Helper()
	for _, sc := range crashtest.Scenarios(b) {
		if sc.Name == string(idemtest.ErrorBeforeCommit) {
			sc.Profile.Rates = map[idemtest.FaultKind]float64{idemtest.ErrorBeforeCommit: 1}
			sc.ForegroundOptions = []idem.Option{idem.WithMaxAttempts(1)}
			return sc
		}
	}
	t.Fatalf("no %s row", idemtest.ErrorBeforeCommit)
	return crashtest.Scenario{}
}

// roundTripFunc is a RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
