package idem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A request hook adds to the query what the journaled URL does not hold:
// a credential under a name of the API's own (Google's key=), but also
// flags and versions (sandbox=true, v=1; HTX's signer adds
// SignatureVersion=2, huobiapi.github.io/docs/spot/v1/en/#signature-
// authentication). Every added value was blanked as a credential, so
// each standalone true, 1 or 2 of the success's body became REDACTED:
// {"quantity":1,"livemode":true} read {"quantity":REDACTED,
// "livemode":REDACTED}, JSON no caller could decode, in Result.Body and
// the journal. A value that short is no credential; a long one the
// server echoes is still blanked.
func TestHookAddedShortQueryFlagsLeaveTheBodyAsItCame(t *testing.T) {
	const key = "AIzaSyFAKE0123456789abcdefghijklmnopqrs"
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		// Modelled: a sandbox that echoes the key the order was made with.
		_, _ = fmt.Fprintf(w, `{"id":"ord_1","version":2,"quantity":1,"livemode":true,"made_with":%q}`, r.URL.Query().Get("key"))
	}))
	t.Cleanup(srv.Close)
	rc := newRecordingClient(t, srv, idem.WithRequestHook(func(r *http.Request) error {
		r.URL.RawQuery = "sandbox=true&v=1&SignatureVersion=2&key=" + key
		return nil
	}))
	res, err := rc.client.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/orders", Body: []byte(`{"quantity":1}`)})
	require.NoError(t, err)
	require.Equal(t, int32(1), posts.Load(), "one order")
	const want = `{"id":"ord_1","version":2,"quantity":1,"livemode":true,"made_with":"REDACTED"}`
	require.JSONEq(t, want, string(res.Body), "the flags' values are the body's own; the key is blanked")
	rec, err := rc.store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.JSONEq(t, want, string(rec.Result.Body), "journaled body")
	rc.requireNothingHolds(t, "k", key)
}
