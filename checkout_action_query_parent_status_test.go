package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// checkoutActionServer models Checkout.com's actions on a payment, POST
// /payments/{id}/captures, /refunds and /voids under Cko-Idempotency-Key:
// each answered 202 Accepted with {"action_id", "reference"} ("Capture a
// payment", "Refund a payment", "Void a payment"), a key's 2xx kept and
// given again to the key for 24 hours ("Subsequent requests with the same
// key will return the same HTTP status code and response body as the
// original request, providing that it was processed successfully",
// checkout.com/docs/payments/manage-payments/idempotency), and "Get
// payment details", GET /payments/{id}, the payment with its status
// (Authorized, Captured, Refunded, Voided). Checkout.com has no lookup by
// key: the payment is where an action is seen, so the action's ResultURL
// is the payment's. The first POST is lost on the way (a load balancer's
// reset before the API read it, modelled): nothing executed.
type checkoutActionServer struct {
	status string // the payment's, before the action
	after  string // the payment's, once the action executed

	mu       sync.Mutex
	posts    int
	keys     []string
	executed int
	replies  map[string]string
}

func (s *checkoutActionServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, `{"id":"`+checkoutActionPayment+`","requested_on":"2026-12-06T13:39:44Z","amount":1000,"currency":"EUR",`+
			`"approved":true,"status":"`+s.status+`","reference":"ORD-5023-4E89"}`)
		return
	}
	s.posts++
	key := r.Header.Get("Cko-Idempotency-Key")
	s.keys = append(s.keys, key)
	if s.posts == 1 {
		dropConnection(w)
		return
	}
	reply, ok := s.replies[key]
	if !ok {
		s.executed++
		s.status = s.after
		reply = `{"action_id":"act_y3oqhf46pyzuxjbcn2giaqnb44","reference":"ACT-ORD-5023-1"}`
		s.replies[key] = reply
	}
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, reply)
}

const checkoutActionPayment = "pay_f2ws3hn4ijquzbytp3v5lsfxge"

// A capture, refund or void of a payment whose first send was lost before
// it reached the API, with the payment as its result endpoint at default
// settings (DecodeJSON): the payment answered still Authorized (or
// Captured, for a refund) was read as the action's own outcome, and the
// action settled succeeded with the payment's id, never sent again: 0
// captures, the goods shipped unpaid and the authorization left to
// expire; 0 refunds, the customer never refunded; 0 voids, the money held
// (or captured by a capture_on schedule) for a dropped order. The
// payment's status is that payment's, not the action's outcome, unless
// it says the action was done to it: the payment Authorized proves
// nothing, the action is sent again under its key and executes once, and
// the payment then Captured (Refunded, Voided) settles it.
func TestCheckoutActionFoundAsItsPaymentIsNotItsOutcome(t *testing.T) {
	for _, tt := range []struct {
		action, status, after, body string
	}{
		{"captures", "Authorized", "Captured", `{"amount":1000,"reference":"CAP-ORD-5023-1","capture_type":"Final"}`},
		{"refunds", "Captured", "Refunded", `{"amount":1000,"reference":"REF-ORD-5023-1"}`},
		{"voids", "Authorized", "Voided", `{"reference":"VOID-ORD-5023-1"}`},
	} {
		t.Run(tt.action, func(t *testing.T) {
			s := &checkoutActionServer{status: tt.status, after: tt.after, replies: map[string]string{}}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Cko-Idempotency-Key", idem.KeyBare))
			key := "ord-5023-" + tt.action
			res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/payments/" + checkoutActionPayment + "/" + tt.action,
				ResultURL: srv.URL + "/payments/" + checkoutActionPayment, Body: []byte(tt.body)})

			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 1, s.executed, "%s executed at the server", tt.action)
			requireEach(t, s.keys, 2, key, "post")
			// Settled once the payment says the action was done to it.
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, checkoutActionPayment, res.ResourceID)
			require.Empty(t, res.Review)
			requireAttemptSays(t, c, key, `whose status "`+tt.status+`" does not say the `+strings.TrimSuffix(tt.action, "s")+" was done to it",
				"an attempt says why the payment's first answer proved nothing")
		})
	}
}

// requireAttemptSays requires an attempt of key's journaled operation to
// have an error containing text.
func requireAttemptSays(t *testing.T, c *idem.Client, key, text, what string) {
	t.Helper()
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	for _, at := range rec.Attempts {
		if strings.Contains(at.Err, text) {
			return
		}
	}
	require.Fail(t, what, "no attempt says %q", text)
}
