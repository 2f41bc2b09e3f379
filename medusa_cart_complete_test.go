package idem_test

import (
	"encoding/json"
	"errors"
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

// medusaCarts models Medusa v1's Complete a Cart (POST
// /store/carts/{id}/complete) with its Idempotency-Key header, as
// medusajs/medusa's IdempotencyKeyService and error-handler middleware
// implement it: the key's record is locked while its request runs
// ("Key already locked", a MedusaError CONFLICT that the error handler
// answers 409 {"code":"invalid_state_error","type":"conflict","message":
// "The request conflicted with another request. You may retry the
// request with the provided Idempotency-Key."}), and once it finished,
// its stored response_code and response_body are answered again, with
// no header saying so: {"type":"order","data":{…the order}}.
//
// The first completion makes the order and its answer is lost (the
// connection dropped); the next locked requests still find the key
// locked (its lock lasts KEY_LOCKED_TIMEOUT, 1 s), then its stored
// answer is replayed.
type medusaCarts struct {
	locked int // requests after the first answered 409 while the key stays locked

	mu     sync.Mutex
	orders []string
	keys   []string
	stored string
}

func (m *medusaCarts) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = append(m.keys, r.Header.Get("Idempotency-Key"))
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch {
	case m.stored == "":
		id := fmt.Sprintf("order_01JDQ3%06d", len(m.orders)+1)
		m.orders = append(m.orders, id)
		m.stored = `{"type":"order","data":{"id":"` + id + `","status":"pending","payment_status":"awaiting","cart_id":"cart_01JDQ2","total":4200,"currency_code":"eur"}}`
		dropConnection(w)
	case m.locked > 0:
		m.locked--
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"code":"invalid_state_error","type":"conflict","message":"The request conflicted with another request. You may retry the request with the provided Idempotency-Key."}`)
	default:
		_, _ = io.WriteString(w, m.stored)
	}
}

// decodeMedusaComplete reads Complete a Cart's answer as a user writes
// it: an order settles it; a cart ("type":"cart", its payment not yet
// authorised) or a swap proves nothing here.
func decodeMedusaComplete(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Type string `json:"type"`
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	if v.Type != "order" || v.Data.ID == "" {
		return idem.Outcome{}, errors.New("medusa: no order in the answer")
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data.ID}, nil
}

// A completion whose answer was lost is resent with the same key; the
// 409 Medusa answers while the key's record is locked names the
// Idempotency-Key and "another request", and is the key in flight, not
// a key reused with another body: waited on, resent, and the stored
// answer then settles it with the order made. One order, the key on
// every attempt.
func TestMedusaCompleteCartConflictWhileKeyLocked(t *testing.T) {
	m := &medusaCarts{locked: 2}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithDecoder(decodeMedusaComplete))

	res, err := c.Submit(t.Context(), idem.Request{Key: "cmpl-7f3a9c", URL: srv.URL + "/store/carts/cart_01JDQ2/complete", Body: []byte(`{}`)})
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Len(t, m.orders, 1, "orders")
	requireOutcome(t, res, err, idem.StateSucceeded, nil, m.orders[0], "")
	require.Equal(t, []string{"cmpl-7f3a9c", "cmpl-7f3a9c", "cmpl-7f3a9c", "cmpl-7f3a9c"}, m.keys, "the key on every attempt")
}
