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

// zuoraOrders models Zuora's v1 Create an order (POST /v1/orders) with
// its idempotency-key header (developer.zuora.com/docs/guides/idempotent-requests:
// "the resulting status code, headers, and the body of this request is
// saved regardless of whether it succeeded or failed. Subsequent
// requests with the same key return the same result"), whose refusals
// come 200 OK ("HTTP 200 doesn't mean your call succeeded",
// developer.zuora.com/docs/guides/error-handling) as {"success":false,
// "processId":…,"reasons":[{"code":…,"message":…}]}
// (developer.zuora.com/docs/guides/error-codes). The first answer is
// lost after the order is processed (connection dropped); the stored
// one is answered again, with no header saying so.
type zuoraOrders struct {
	answer string // the body processing the order produced

	mu     sync.Mutex
	stored map[string]string
	made   int
	keys   []string
}

func (z *zuoraOrders) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	z.mu.Lock()
	defer z.mu.Unlock()
	z.keys = append(z.keys, key)
	if body, ok := z.stored[key]; ok {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
		return
	}
	z.made++
	z.stored[key] = z.answer
	dropConnection(w)
}

// decodeZuora reads the v1 envelope as a user writes it: "success"
// true with the order's number settles it, false with its reasons fails
// it with the first reason; anything else proves nothing.
func decodeZuora(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Success     *bool  `json:"success"`
		OrderNumber string `json:"orderNumber"`
		Reasons     []struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"reasons"`
	}
	switch err := json.Unmarshal(a.Body, &v); {
	case err != nil:
		return idem.Outcome{}, err
	case v.Success == nil:
		return idem.Outcome{}, errors.New("zuora: no success member")
	case *v.Success && v.OrderNumber != "":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.OrderNumber}, nil
	case !*v.Success && len(v.Reasons) > 0:
		return idem.Outcome{State: idem.StateFailed, Reason: fmt.Sprintf("%d: %s", v.Reasons[0].Code, v.Reasons[0].Message)}, nil
	}
	return idem.Outcome{}, errors.New("zuora: neither an order nor a reason")
}

// A Zuora order whose answer was lost is resent with the same key and
// settled by the stored answer Zuora returns again: its order, or its
// 200 OK refusal (nothing made), read by a decoder of the v1 envelope. DecodeJSON
// proves nothing from "success": false (see README), which a Zuora
// user's decoder must read. The request is processed once either way.
func TestZuoraStoredAnswerAfterLostResponse(t *testing.T) {
	for _, tt := range []struct {
		name, answer string
		state        idem.State
		kinds        []error
		id           string
	}{
		{"order", `{"success":true,"orderNumber":"O-00000001","accountNumber":"A00000001","status":"Completed","subscriptionNumbers":["A-S00000001"]}`,
			idem.StateSucceeded, nil, "O-00000001"},
		{"refused 200 OK", `{"success":false,"processId":"CBCFED6580B4E076","reasons":[{"code":53100320,"message":"'termType' value should be one of: TERMED, EVERGREEN"}]}`,
			idem.StateFailed, []error{idem.ErrFailed}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			z := &zuoraOrders{answer: tt.answer, stored: map[string]string{}}
			srv := httptest.NewServer(http.HandlerFunc(z.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithDecoder(decodeZuora))

			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-2026-11-29-0042", URL: srv.URL + "/v1/orders",
				Body: []byte(`{"orderDate":"2026-11-29","existingAccountNumber":"A00000001","subscriptions":[{"orderActions":[{"type":"CreateSubscription"}]}]}`)})
			requireOutcome(t, res, err, tt.state, tt.kinds, tt.id, "")
			if tt.state == idem.StateFailed {
				require.Equal(t, "53100320: 'termType' value should be one of: TERMED, EVERGREEN", res.Reason)
			}
			z.mu.Lock()
			defer z.mu.Unlock()
			require.Equal(t, 1, z.made, "requests processed: the key's first, once")
			require.Equal(t, []string{"ord-2026-11-29-0042", "ord-2026-11-29-0042"}, z.keys, "the key on every attempt")
		})
	}
}
