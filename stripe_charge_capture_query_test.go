package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// stripeChargeCaptureServer models Stripe's legacy capture of a charge
// created with capture=false, POST /v1/charges/{id}/capture under
// Idempotency-Key, and "Retrieve a charge", GET /v1/charges/{id}: the
// Charge's "status" is "succeeded" once it is authorised, captured or
// not, and its "captured" says which ("If the charge was created without
// capturing, this Boolean represents whether it is still uncaptured or
// has since been captured", the Charge object; "Uncaptured payments
// expire exactly seven days after they are created", Capture a charge).
// A key's answer is given again to the key. The first POST is lost
// before the API read it (modelled): nothing executed.
type stripeChargeCaptureServer struct {
	mu       sync.Mutex
	captured bool
	posts    int
	keys     []string
	executed int
}

const stripeUncapturedCharge = "ch_3MmlLrLkdIwHu7ix0snN0B15"

func (s *stripeChargeCaptureServer) charge() string {
	return `{"id":"` + stripeUncapturedCharge + `","object":"charge","amount":1099,"amount_captured":` +
		map[bool]string{false: "0", true: "1099"}[s.captured] + `,"amount_refunded":0,"captured":` +
		strconv.FormatBool(s.captured) + `,"currency":"usd","paid":true,"refunded":false,"status":"succeeded"}`
}

func (s *stripeChargeCaptureServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, s.charge())
		return
	}
	s.posts++
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	if s.posts == 1 {
		dropConnection(w)
		return
	}
	if !s.captured {
		s.executed++
		s.captured = true
	}
	_, _ = io.WriteString(w, s.charge())
}

// A Stripe charge's capture whose first send was lost, its result
// endpoint the charge: the charge still uncaptured answered "status":
// "succeeded", which g39 counts as a capture done, and the capture
// settled succeeded, never sent again: 0 captures, the authorisation
// left to expire in seven days, the goods shipped unpaid. A charge
// saying "captured": false proves the capture was not done: it is sent
// again under its key and executes once.
func TestStripeChargeCaptureQueryUncapturedIsNotCaptured(t *testing.T) {
	s := &stripeChargeCaptureServer{}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	const key = "ord-7781-capture"
	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/v1/charges/" + stripeUncapturedCharge + "/capture",
		ResultURL: srv.URL + "/v1/charges/" + stripeUncapturedCharge, Body: []byte("amount=1099")})

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 1, s.executed, "captures at the server")
	requireEach(t, s.keys, 2, key, "post")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, stripeUncapturedCharge, res.ResourceID)
	require.Empty(t, res.Review)
	requireAttemptSays(t, c, key, `which says "captured": false`, "an attempt says why the uncaptured charge proved nothing")
}

// A refund of a charge, POST /v1/charges/{id}/refunds, executed but its
// answer lost, its result endpoint the refund itself (GET
// /v1/refunds/{id}, "status": "succeeded"): the refund is not the charge
// the request acted on, so its own status settles it, and it is not
// sent again: 1 refund, 1 post.
func TestStripeRefundQueryAnsweredByTheRefundSettles(t *testing.T) {
	const refund = "re_3MmlLrLkdIwHu7ix0uke3Ezy"
	var mu sync.Mutex
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost {
			posts++
			dropConnection(w) // after the refund was made
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"`+refund+`","object":"refund","amount":1099,"charge":"`+stripeUncapturedCharge+`","status":"succeeded"}`)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-7781-refund-1", URL: srv.URL + "/v1/charges/" + stripeUncapturedCharge + "/refunds",
		ResultURL: srv.URL + "/v1/refunds/" + refund, Body: []byte("amount=1099")})

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, posts)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, refund, res.ResourceID)
}
