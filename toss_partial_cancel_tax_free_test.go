package idem_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idemkit/idem"
)

// Toss Payments' cancel, POST /v1/payments/{paymentKey}/cancel, takes
// Idempotency-Key, its guide's own example a partial cancel whose lost
// answer would refund twice (docs.tosspayments.com/guides/using-api/
// idempotency-key: "같은 요청이 여러 번 일어나도 항상 첫 번째 요청과 같은
// 결과가 돌아옵니다"). A partial cancel sends "cancelAmount" and, of it,
// the tax-free part, "taxFreeAmount"; the answer is the payment, "해당
// 결제 건의 정보를 담은 Payment 객체의 cancels 필드에 취소한 기록이
// 쌓입니다" (docs.tosspayments.com/guides/apis/cancel-payment), whose top-level
// "taxFreeAmount" is the payment's own, beside "totalAmount" and
// "balanceAmount", the cancel's in cancels[]. The 409 while the key's
// request runs, and its words, are modelled (firstAnswerServer's).
const (
	tossCancelKey    = "cancel-ord-5521-1"
	tossPaymentKey   = "5zJ4xY7m0kODnyRpQWGrN2xqGlNvLrKwv1M9ENjbeoPaZdL6"
	tossCancelBody   = `{"cancelReason":"고객이 일부 품목 취소를 원함","cancelAmount":5000,"taxFreeAmount":1000}`
	tossCancelBusy   = `{"code":"IDEMPOTENT_REQUEST_PROCESSING","message":"이전 멱등 요청이 처리 중입니다."}`
	tossCanceledPart = `{"mId":"tosspayments","version":"2022-11-16","paymentKey":%q,"orderId":"ord-5521","status":"PARTIAL_CANCELED",` +
		`"currency":"KRW","totalAmount":20000,"balanceAmount":15000,"suppliedAmount":13636,"vat":1364,"taxFreeAmount":%d,"taxExemptionAmount":0,` +
		`"cancels":[{"cancelReason":"고객이 일부 품목 취소를 원함","cancelAmount":5000,"taxFreeAmount":1000,"refundableAmount":15000,"cancelStatus":"DONE"}]}`
)

// decodeTossPayment reads a Toss Payment object: its paymentKey, a cancel
// done once the payment is (partially) canceled.
func decodeTossPayment(a *idem.Answer) (idem.Outcome, error) {
	var p struct{ PaymentKey, Status string }
	if err := json.Unmarshal(a.Body, &p); err != nil || p.PaymentKey == "" {
		return idem.Outcome{}, fmt.Errorf("no payment: %v", err)
	}
	if p.Status == "PARTIAL_CANCELED" || p.Status == "CANCELED" {
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: p.PaymentKey}, nil
	}
	return idem.Outcome{State: idem.StateProcessing, ResourceID: p.PaymentKey}, nil
}

// The key's request is a copy of our partial cancel (a sidecar's resend
// of a reset): our post gets two 409s, then its stored answer, the
// payment with its own tax-free amount at the top level (3000, or 2000
// if counted net of the cancels), not our cancel's 1000. Read as the
// cancel's, it made our own refund another request's (ReviewKeyInUse,
// ErrKeyConflict: 3 posts, 1 cancel made), and a caller
// told so refunds again under a new key. A component of the amount the
// server counts its own way (the tax-free part, a tip, a fee, a
// discount) proves nothing: ours, succeeded.
func TestTossPartialCancelOfOursAfterTheKeyWasHeld(t *testing.T) {
	for _, paymentTaxFree := range []int{3000, 2000} {
		t.Run(fmt.Sprint(paymentTaxFree), func(t *testing.T) {
			f := &firstAnswerServer{header: "Idempotency-Key", busyBody: tossCancelBusy, busy: 2, stored: map[string]string{},
				answer: func(int, []byte) string { return fmt.Sprintf(tossCanceledPart, tossPaymentKey, paymentTaxFree) }}
			srv, c := f.start(t, decodeTossPayment)
			f.stored[tossCancelKey] = fmt.Sprintf(tossCanceledPart, tossPaymentKey, paymentTaxFree)
			f.made = 1

			f.requireOursAfterTheKeyWasHeld(t, c, idem.Request{Key: tossCancelKey,
				URL: srv.URL + "/v1/payments/" + tossPaymentKey + "/cancel", Body: []byte(tossCancelBody)}, tossPaymentKey)
		})
	}
}
