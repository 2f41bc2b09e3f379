package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// An envelope that names its error by number and by reason phrase, as
// snapd's REST API does ({"type":"error","status":"Unauthorized",
// "status_code":401,"result":{"message":…}},
// snapcraft.io/docs/reference/development/error-responses), answered
// 200 OK as Midtrans answers its errors (the error's own "id" beside the
// "status_code"), is no resource made: "Not Acceptable" beside 406 is
// the 406's name, not a payment's status numbered 406 as dLocal's
// CANCELLED is numbered 400. Read as one, the submit settled succeeded
// with the error's id for the payment.
func TestStatusCodeBesideItsReasonPhraseIsAnError(t *testing.T) {
	for _, body := range []string{
		`{"status_code":"406","status":"Not Acceptable","status_message":"Duplicate order ID.","id":"be929ec4-95fd-4a8c-9e2c-2f0b7d8f0b3c"}`,
		`{"type":"error","status":"INTERNAL_SERVER_ERROR","status_code":500,"id":"req-8c1f"}`,
	} {
		v := newVendor(t, shape{status: http.StatusOK, body: body})
		res, err := v.submit(t)
		require.NotEqual(t, idem.StateSucceeded, res.State, "%s: err %v", body, err)
		require.NotErrorIs(t, err, idem.ErrFailed, body)
		require.Empty(t, res.ResourceID, body)
	}
}

// The same envelope, 200 OK, to a result query (the query's credentials
// refused: "Unauthorized" beside 401) says nothing of the order: not a
// search that found nothing, which lets the order be sent again once the
// result lag has passed. The payment whose answer was lost is asked
// about again, never resent.
func TestStatusCodeBesideItsReasonPhraseToAQueryIsNoNotFound(t *testing.T) {
	var (
		mu      sync.Mutex
		posts   int
		queries int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			queries++
			_, _ = io.WriteString(w, `{"type":"error","status":"Unauthorized","status_code":401,"result":{"message":"access denied"}}`)
			return
		}
		posts++
		// The payment is taken; its answer is lost.
		dropConnection(w)
	}))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithResultEndpoint(srv.URL+"/payments?order_id={key}"))
	const body = `{"order_id":"k","amount":"1500","currency":"USD"}`

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/payments", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State)

	for range 3 {
		clock.Advance(idem.DefaultResultLag)
		_, err = c.Resume(t.Context())
		require.NoError(t, err)
	}
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.NotEqual(t, idem.StateSucceeded, op.State)
	require.NotEqual(t, idem.StateFailed, op.State)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, posts, "the payment is sent once, never again after the lag")
	require.Positive(t, queries)
}
