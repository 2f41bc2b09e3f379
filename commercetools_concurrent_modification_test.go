package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// ctVersioned is a commercetools resource updated under optimistic
// concurrency control: an update carries the version it was built on,
// and one that does not match is refused 409 ConcurrentModification
// with the current version
// (https://commercetools.github.io/commercetools-sdk-java-v2/javadoc/com/commercetools/api/models/error/ConcurrentModificationError.html:
// code, message "Object $resourceId has a different version than
// expected. Expected: $expectedVersion - Actual: $currentVersion.",
// currentVersion). commercetools keeps no idempotency key: the version
// check is what refuses a copy of an update that executed
// (https://commercetools.github.io/commercetools-jvm-sdk/apidocs/io/sphere/sdk/client/ConcurrentModificationException.html,
// an update sent "by accident again"). lose answers the first update
// applied with a gateway's 502.
type ctVersioned struct {
	version int
	lose    bool

	mu      sync.Mutex
	applied int
	updates []string
}

func (ct *ctVersioned) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var u struct {
		Version int `json:"version"`
	}
	_ = json.Unmarshal(b, &u)
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.updates = append(ct.updates, string(b))
	w.Header().Set("Content-Type", "application/json")
	if u.Version != ct.version {
		msg := fmt.Sprintf("Object 9f1c2b7e-5d3a-4c8e-b1f0-2a6d4e8c7b35 has a different version than expected. Expected: %d - Actual: %d.", u.Version, ct.version)
		w.WriteHeader(http.StatusConflict)
		_, _ = fmt.Fprintf(w, `{"statusCode":409,"message":%q,"errors":[{"code":"ConcurrentModification","message":%q,"currentVersion":%d}]}`, msg, msg, ct.version)
		return
	}
	ct.version++
	ct.applied++
	if ct.lose {
		ct.lose = false
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `<html>502 Bad Gateway</html>`)
		return
	}
	_, _ = fmt.Fprintf(w, `{"id":"9f1c2b7e-5d3a-4c8e-b1f0-2a6d4e8c7b35","version":%d,"paymentStatus":{"interfaceCode":"paid"}}`, ct.version)
}

const ctUpdate = `{"version":1,"actions":[{"action":"setStatusInterfaceCode","interfaceCode":"paid"}]}`

func (ct *ctVersioned) submit(t *testing.T) (*idem.Client, *idem.Result, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(ct.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/shop/payments/9f1c2b7e-5d3a-4c8e-b1f0-2a6d4e8c7b35",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(ctUpdate)})
	return c, res, err
}

// A 409 ConcurrentModification says no key is in flight: the update's
// version is behind, and the same bytes resent are refused so forever.
// Read as a 409 in flight, it was resent until the foreground budget ran
// out and then by the reconciler until the key window passed. To a
// first attempt it is a refusal, but not the update's own failure: what
// moved the version may be a copy of this update (below), so it is left
// for a person, never failed; sent once, nothing applied.
func TestConcurrentModificationToAFirstAttemptIsForAPerson(t *testing.T) {
	ct := &ctVersioned{version: 2}
	c, res, err := ct.submit(t)
	requireVersionRefusalForAPerson(t, c, res, err, "different version than expected")
	ct.mu.Lock()
	defer ct.mu.Unlock()
	require.Equal(t, 0, ct.applied, "updates applied")
	require.Equal(t, []string{ctUpdate}, ct.updates)
}

// Behind the client's own sidecar, the update applies and its answer is
// lost as a 503 reset before headers, which the sidecar retries (Istio's
// default retry_on includes reset and 503): the copy is refused 409
// ConcurrentModification, the version being the one the first copy
// made, and that refusal is the only answer idem sees, to its first
// attempt. Failed, as it was, the caller builds the update again on
// version 2 and applies it twice. One update applied; never failed.
func TestConcurrentModificationBehindARetryingMeshIsNoFailure(t *testing.T) {
	ct := &ctVersioned{version: 1}
	sidecar := retryingSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		ct.mu.Lock()
		first := ct.applied == 0
		ct.mu.Unlock()
		if !first {
			ct.serve(w, r)
			return
		}
		ct.serve(httptest.NewRecorder(), r) // applied; its answer lost
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
	})
	c := clientFor(t, sidecar, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: sidecar.URL + "/shop/payments/9f1c2b7e-5d3a-4c8e-b1f0-2a6d4e8c7b35",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(ctUpdate)})
	require.NotErrorIs(t, err, idem.ErrFailed, "the update applied read as failed")
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
	ct.mu.Lock()
	defer ct.mu.Unlock()
	require.Equal(t, 1, ct.applied, "updates applied")
	require.Equal(t, []string{ctUpdate, ctUpdate}, ct.updates, "ours and the sidecar's copy, nothing resent")
}

// After an update that applied and whose answer a gateway lost, the
// 409s refuse copies of what executed: never failed (a caller told so
// would apply it again on the new version), left for a person once they
// persist (ReviewRefusedAfterSend). One update applied.
func TestConcurrentModificationAfterALostAnswerIsForAPerson(t *testing.T) {
	ct := &ctVersioned{version: 1, lose: true}
	c, res, err := ct.submit(t)
	requireRefusedAfterSend(t, c, res, err, "k", "update applied")
	ct.mu.Lock()
	defer ct.mu.Unlock()
	require.Equal(t, 1, ct.applied, "updates applied")
	require.Equal(t, slices.Repeat([]string{ctUpdate}, 4), ct.updates)
}
