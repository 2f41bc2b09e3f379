package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// cmOrders is CM.com's Online Payments order create, POST
// /ps/api/public/v1/merchants/{merchant_key}/orders, whose
// order_reference is "The order reference from the merchant"
// (developers.cm.com, payments-platform, Create Order) and its only key:
// the API takes no idempotency header, answers 201 with the order_key,
// url and expires_on, and finds an order by its order_key only, so no
// result endpoint can ask by our key. Modelled: a reused
// order_reference refused 409 in CM.com's error shape, {"messages":
// [...]} (what CM.com's own Magento plugin reads, $body->messages[0]);
// no CM.com page says what a reused reference gets.
type cmOrders struct {
	mu      sync.Mutex
	lose    bool              // the first create's answer is lost after the order is made
	orders  map[string]string // order_reference -> order_key
	creates []string          // each create's order_reference
}

func (m *cmOrders) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var o struct {
		OrderReference string `json:"order_reference"`
	}
	_ = json.Unmarshal(body, &o)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.creates = append(m.creates, o.OrderReference)
	w.Header().Set("Content-Type", "application/json")
	if _, held := m.orders[o.OrderReference]; held {
		w.WriteHeader(http.StatusConflict)
		_, _ = fmt.Fprintf(w, `{"messages":["An order with order reference '%s' already exists."]}`, o.OrderReference)
		return
	}
	key := fmt.Sprintf("0287A1617D93780EF28044B98438BF%02d", len(m.orders)+1)
	m.orders[o.OrderReference] = key
	if m.lose {
		m.lose = false
		dropConnection(w)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"order_key":%q,"expires_on":"2026-11-29T13:00:00Z",`+
		`"url":"https://testsecure.docdatapayments.com/ps/menu?merchant_name=shop&client_language=NL&payment_cluster_key=%s"}`, key, key)
}

func decodeCMOrder(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		OrderKey string `json:"order_key"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.OrderKey == "" {
		return idem.Outcome{}, fmt.Errorf("cm: no order: %w", err)
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.OrderKey}, nil
}

const cmReference = "100000123-8f2c41"

func cmServer(t testing.TB, m *cmOrders) (*idem.Client, idem.Request) {
	t.Helper()
	m.orders = map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeCMOrder))
	return c, idem.Request{Key: cmReference, URL: srv.URL + "/ps/api/public/v1/merchants/5a4e2c3b-0f1d-4e6a-9b7c-8d2e1f3a4b5c/orders",
		Body: []byte(`{"order_reference":"` + cmReference + `","description":"Order 100000123","amount":2500,"currency":"EUR",` +
			`"email":"shopper@example.com","language":"nl","country":"NL"}`)}
}

func (m *cmOrders) requireCreates(t testing.TB, n int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	requireEach(t, m.creates, n, cmReference, "order_reference")
	require.Len(t, m.orders, 1, "orders")
}

// requireOpenNotSettled asserts that the call neither failed (a shop
// told "failed" makes a second order under a new reference) nor settled
// with the order the reference holds, and that its record is open in
// state after attempts.
func requireOpenNotSettled(t testing.TB, c *idem.Client, res *idem.Result, err error, state idem.State, attempts int) {
	t.Helper()
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, state, res.State)
	require.Empty(t, res.ResourceID)
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, cmReference)
	require.NoError(t, err)
	require.True(t, rec.Open())
	require.Len(t, rec.Attempts, attempts)
	for _, a := range rec.Attempts[len(rec.Attempts)-4:] {
		require.Equal(t, http.StatusConflict, a.Status)
	}
}

// The first create's answer is lost after CM.com made the order; every
// resend is refused 409 for the reference. Its words say neither
// "duplicate" nor "used", so the 409 is read as our own request still
// running (DefaultClassifier): waited for and resent, the call ending
// processing after its five attempts, never failed and never settled
// with an order it did not see. Pinned as idem behaves: a 409 "already
// exists" naming the key's member is not read as the key used (left for
// a person), as SumUp's, whose code says DUPLICATED, is.
func TestCMOrderReferenceConflictAfterALostCreate(t *testing.T) {
	m := &cmOrders{lose: true}
	c, req := cmServer(t, m)

	res, err := c.Submit(t.Context(), req)
	requireOpenNotSettled(t, c, res, err, idem.StateProcessing, idem.DefaultMaxAttempts)
	m.requireCreates(t, idem.DefaultMaxAttempts)
}

// A first create refused 409 for a reference that holds an order
// nothing of ours made (or a copy of ours made unseen): read as another
// request holding the key, resent, and left pending after the call's
// five attempts; never failed, never settled with that order. Pinned as
// idem behaves (see above).
func TestCMOrderReferenceConflictToAFirstAttempt(t *testing.T) {
	m := &cmOrders{}
	c, req := cmServer(t, m)
	m.orders[cmReference] = "0287A1617D93780EF28044B98438BF77"

	res, err := c.Submit(t.Context(), req)
	requireOpenNotSettled(t, c, res, err, idem.StatePending, idem.DefaultMaxAttempts)
	m.requireCreates(t, idem.DefaultMaxAttempts)
}
