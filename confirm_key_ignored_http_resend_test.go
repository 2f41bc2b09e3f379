package idem_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// One attempt of idem's may be two copies on the wire: net/http resends a
// request carrying an Idempotency-Key header on a fresh connection when
// the reused one it was written on dies before any answer ("the request
// is retried if it is idempotent or has an Idempotency-Key or
// X-Idempotency-Key header", net/http's Transport docs). To the Solidgate
// endpoint keyIgnoringCharges models, which takes each copy for a new
// payment, the first copy charged (pay_2) and died with its connection;
// the second charged again (pay_3) and was answered 500, marked ignored:
// flagged ReviewKeyIgnored after one journaled attempt. Confirm counted
// one send and cleared the flag on the webhook's event for one payment:
// a clean payment in the journal, two on the card. It keeps a review for
// the other copy, as when idem itself resent it. net/http resends only
// to an endpoint heard from (heardEndpoints): an earlier payment's 201
// came without the marker (modelled: a front answering for the endpoint,
// or the endpoint before it marked its answers), and left the connection
// to reuse.
func TestConfirmKeyIgnoredAfterHTTPResendKeepsMaybeTwice(t *testing.T) {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"pay_1","status":"settled"}`)
		case 2:
			dropConnection(w) // pay_2 charged, its connection dead
		default:
			ignoredInternalError(w) // net/http's copy: pay_3 charged
		}
	})
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	s.requireCharges(t, []string{"k0", "k", "k"})
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, 1, op.Attempts, "attempts: net/http's copy is no attempt of idem's")

	res, err = c.Confirm(t.Context(), "", "k", cardOrderUpdated(idem.StateSucceeded, "pay_3", "evt_pay_3_settle_ok"))
	require.NoError(t, err, "Confirm()")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "pay_3", res.ResourceID)
	require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Confirm(): Review: the first copy may have charged")
	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewMaybeTwice, op.Review, "journal: Review")
	flagged, err := c.List(t.Context(), idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, 1, "List(Review)")
	s.requireCharges(t, []string{"k0", "k", "k"})
}
