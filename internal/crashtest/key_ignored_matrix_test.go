package crashtest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
)

// TestFaultMatrixWhereTheEndpointIgnoresTheKey runs every row of the fault
// matrix, the restart rows included, at the default client settings
// against an endpoint that does not de-duplicate by the key (Solidgate:
// "Idempotency support varies by endpoint. Send the request with an
// Idempotency-Key header and check the Idempotency-Status value. A value
// of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests;
// idemtest.KeyIgnored), where every resend is a second order. A second
// order is allowed only where the journal flags the operation for a
// person (flagged duplicates); a silent one (settled clean, or open
// unflagged), a lost operation or a wrong settlement fails the row.
func TestFaultMatrixWhereTheEndpointIgnoresTheKey(t *testing.T) {
	ops := 100 // the mixed row's faults meet on one operation too rarely with fewer
	if testing.Short() {
		ops = 20
	}
	runMatrix(t, idemtest.KeyIgnored(), ops)
}

// TestFaultMatrixCatchesASilentDuplicate shows that the matrix tells a
// second order idem flagged from one it did not. Between the client and
// the endpoint that ignores the key stands a gateway that forwards only
// the headers it knows, dropping Idempotency-Status (modelled): idem never
// learns that the endpoint ignores the key, so net/http's own resend of a
// submit whose reused connection died after the order (drop-after-commit)
// places a second one that idem settles clean. The matrix counts those
// as silent duplicates and fails the row; with the marker through, the
// same row passes (TestFaultMatrixWhereTheEndpointIgnoresTheKey).
func TestFaultMatrixCatchesASilentDuplicate(t *testing.T) {
	var sc crashtest.Scenario
	for _, s := range crashtest.Scenarios(idemtest.KeyIgnored()) {
		if s.Name == string(idemtest.DropAfterCommit) {
			sc = s
		}
	}
	require.NotEmpty(t, sc.Name, "no %s row", idemtest.DropAfterCommit)
	sc.Transport = func(rt http.RoundTripper) http.RoundTripper { return markerStripper{rt} }
	row, err := crashtest.RunScenario(t.Context(), sc, 100, 7, t.TempDir())
	require.NoError(t, err)
	t.Logf("%+v", row)
	require.Positive(t, row.SilentDuplicates, "second orders idem did not flag")
	require.Zero(t, row.FlaggedDuplicates, "idem never learnt the endpoint ignores the key")
	require.Equal(t, row.Duplicates, row.SilentDuplicates)
	require.NotEmpty(t, row.Problems, "the matrix reports them")
}

// markerStripper is a gateway that drops the Idempotency-Status header
// from every answer.
type markerStripper struct{ next http.RoundTripper }

func (m markerStripper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(r)
	if resp != nil {
		resp.Header.Del("Idempotency-Status")
	}
	return resp, err
}
