package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// alreadyPaidOrder is an order API that reads the Idempotency-Key header
// and refuses every request about order o-1, paid already, 400 "Order
// already paid" (modelled on order APIs' ORDER_ALREADY_PAID, and on WeChat
// Pay's close-order refusal ORDERPAID, "该订单已支付", the order is paid,
// https://developers.weixin.qq.com/community/pay/doc/000e66c8408920fdc01aeaffc56c00).
// requests counts what reached it.
func alreadyPaidOrder(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprint(w, `{"error":{"code":"ORDER_ALREADY_PAID","message":"Order already paid"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// A cancel of a paid order refused "Order already paid" is refused for the
// order's state: a copy of the cancel, whatever a proxy resent, cannot
// have paid the order. Read as a payment's "already paid" (a copy of the
// payment may have paid it: duplicateWords's alreadyVerbs), it was left
// unknown for a person as the key's "already used", ErrKeyConflict, where
// it had failed with the server's reason. Failed; one request.
func TestAlreadyPaidRefusesACancelForTheOrdersState(t *testing.T) {
	srv, requests := alreadyPaidOrder(t)
	c := clientFor(t, srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "cancel-1", URL: srv.URL + "/v1/orders/o-1/cancel", Body: []byte(`{"reason":"customer"}`)})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "the order's state refused it, not the key")
	require.Equal(t, idem.StateFailed, res.State)
	require.Empty(t, res.Review)
	require.Contains(t, res.Reason, "Order already paid")
	require.EqualValues(t, 1, requests.Load())
}

// The same words to a payment's first attempt, from a server that keeps
// its idempotency store by the key's header but checks the order before
// the key: the payment that paid the order may be a copy of ours a proxy
// sent first (Istio's retry of a reset), executed, its answer lost, so
// never failed (the caller would pay again) nor resent. It was failed
// (and, before that, left as the key's "already used", ErrKeyConflict,
// though no key was reused). With no result endpoint to ask by the key:
// unknown, ReviewRefusedAfterSend, ErrNeedsReview, its error saying the
// order is paid, maybe by a copy of this request, and to ask the
// provider whose. One request (with a result endpoint:
// order_paid_under_another_key_test.go).
func TestAlreadyPaidToAPaymentsFirstAttemptIsLeftUnknown(t *testing.T) {
	srv, requests := alreadyPaidOrder(t)
	c := clientFor(t, srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "pay-1", URL: srv.URL + "/v1/orders/o-1/payments", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "no key was reused")
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
	require.Contains(t, err.Error(), "Order already paid")
	require.Contains(t, err.Error(), "copy of this request")
	require.Contains(t, err.Error(), "ask the provider")
	require.EqualValues(t, 1, requests.Load())
}

// The same words in a 200 whose body the decoder reads as failed, the
// key in the Idempotency-Key header (modelled: an API answering its
// refusals 200 OK in an envelope, as WPG answers "Duplicate Order", and a
// decoder that reads the envelope's refusal as failed): the 409's
// meaning in another envelope. It was weighed as the key's "already
// used", unknown, ReviewKeyInUse and ErrKeyConflict, though no key was
// reused; now as the 409 is: unknown, ReviewRefusedAfterSend,
// ErrNeedsReview, its error saying the order is paid, maybe by a copy of
// this request. One request.
func TestAlreadyPaidInA200ToAPaymentsFirstAttemptIsLeftUnknown(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusOK, body: `{"result":"error","message":"Order already paid"}`})
	envelope := func(a *idem.Answer) (idem.Outcome, error) {
		var b struct{ Result, Message string }
		if err := json.Unmarshal(a.Body, &b); err != nil || b.Result != "error" {
			return idem.Outcome{}, fmt.Errorf("unexpected body: %s", a.Body)
		}
		return idem.Outcome{State: idem.StateFailed, Reason: b.Message}, nil
	}
	res, err := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithDecoder(envelope)).Submit(t.Context(),
		idem.Request{Key: "k", URL: v.srv.URL + "/v1/orders/o-1/payments", Body: []byte(`{"amount":100}`)})
	requireOrderPaidUnknown(t, res, err)
	v.requireKeys(t, "Idempotency-Key", "k", 1)
}
