package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Payment APIs that take the idempotency key in a header and the
// merchant's order id in the body may check the order id before (or
// without) their idempotency store, and refuse an order id they hold with
// a 400:
//   - dLocal, X-Idempotency-Key, 400 {"code":5009,"message":"Order ID is
//     duplicated."} (docs.dlocal.com/reference/http-errors-payments);
//   - Toss Payments, Idempotency-Key, 400 DUPLICATED_ORDER_ID to a
//     billing payment under an orderId it approved, and 400
//     ALREADY_PROCESSED_PAYMENT, "This is a payment that has already been
//     processed." ("이미 처리된 결제 입니다." without Accept-Language: en),
//     to a confirmation of a payment it confirmed
//     (docs.tosspayments.com/reference/error-codes).
//
// Behind a sidecar that retries the 503 of a reset (Istio's default), the
// first copy of the first attempt makes the payment and the sidecar's copy
// of the same bytes and key is refused: that refusal is all idem hears.
// ErrFailed told the caller the payment failed while it was taken, and a
// new attempt under a new order id charges twice. It is the key's "already
// used" (ReviewKeyInUse, as WPG's 200 "Duplicate Order" is): open, for a
// person, never resent.
func TestDuplicateOrderRefusalToAFirstAttemptWithTheKeyInAHeader(t *testing.T) {
	for _, tt := range []struct {
		name, header, member, path, body, refusal, words string
	}{
		{"dlocal 5009", "X-Idempotency-Key", "order_id", "/payments",
			`{"amount":120.00,"currency":"USD","country":"BR","payment_method_id":"CARD","payment_method_flow":"DIRECT","order_id":"657434343"}`,
			`{"code":5009,"message":"Order ID is duplicated."}`, "Order ID is duplicated."},
		{"toss DUPLICATED_ORDER_ID", "Idempotency-Key", "orderId", "/v1/billing/bk_7Xn2",
			`{"customerKey":"ck_91","amount":4900,"orderId":"a4CWyWY5m89PNh7xJwhk1","orderName":"monthly plan"}`,
			`{"code":"DUPLICATED_ORDER_ID","message":"이미 승인 및 취소가 진행된 중복된 주문번호 입니다. 다른 주문번호로 진행해주세요."}`, "중복된 주문번호"},
		{"toss ALREADY_PROCESSED_PAYMENT", "Idempotency-Key", "paymentKey", "/v1/payments/confirm",
			`{"paymentKey":"5zJ4xY7m0kODnyRpQWGrN2xqGlNvLrKwv1M9ENjbeoPaZdL6","orderId":"a4CWyWY5m89PNh7xJwhk1","amount":15000}`,
			`{"code":"ALREADY_PROCESSED_PAYMENT","message":"이미 처리된 결제 입니다."}`, "이미 처리된 결제"},
		{"toss ALREADY_PROCESSED_PAYMENT in English", "Idempotency-Key", "paymentKey", "/v1/payments/confirm",
			`{"paymentKey":"5zJ4xY7m0kODnyRpQWGrN2xqGlNvLrKwv1M9ENjbeoPaZdL6","orderId":"a4CWyWY5m89PNh7xJwhk1","amount":15000}`,
			`{"code":"ALREADY_PROCESSED_PAYMENT","message":"This is a payment that has already been processed."}`, "already been processed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &orderIDDesk{member: tt.member, header: tt.header, refusal: tt.refusal, held: map[string]bool{}}
			sidecar := retryingSidecar(t, o.serve)
			c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyHeader(tt.header, idem.KeyBare))
			req := idem.Request{Key: "k-7", URL: sidecar.URL + tt.path, Body: []byte(tt.body)}

			requireLeftForAPerson(t, c, req, tt.words)

			o.mu.Lock()
			defer o.mu.Unlock()
			require.Equal(t, 1, o.payments, "payments")
			require.Equal(t, []string{tt.body, tt.body}, o.bodies, "copies: ours and the sidecar's, the same bytes, nothing resent")
			require.Equal(t, []string{"k-7", "k-7"}, o.keys, "the key of each copy")
		})
	}
}

// orderIDDesk is a payment API that reads the order id (its JSON member)
// before its idempotency store: the first request under an id makes the
// payment and its answer is lost to a reset (503, which a sidecar
// retries); any later one under the id is refused with refusal, a 400.
type orderIDDesk struct {
	member, header, refusal string

	mu       sync.Mutex
	held     map[string]bool
	payments int
	bodies   []string
	keys     []string // the key header of each submit
}

func (o *orderIDDesk) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var members map[string]any
	_ = json.Unmarshal(b, &members)
	id, _ := members[o.member].(string)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bodies = append(o.bodies, string(b))
	o.keys = append(o.keys, r.Header.Get(o.header))
	makeOrRefuse(w, o.held, &o.payments, id, o.refusal)
}

// With the key in a header, a first attempt's 400 that is not about the
// order being a duplicate is the payment's own failure (ErrFailed, one
// send), whatever else its words hold: a validation error, or a duplicate
// of one of the order's parts.
func TestRefusalNotAboutADuplicateOrderWithTheKeyInAHeaderFails(t *testing.T) {
	for _, tt := range []struct {
		name, body string
	}{
		// docs.dlocal.com/reference/http-errors-payments
		{"dlocal 5001", `{"code":5001,"message":"Missing parameter. payer.document","param":"payer.document"}`},
		{"dlocal 5008", `{"code":5008,"message":"Token not found or inactive."}`},
		// docs.tosspayments.com/reference/error-codes
		{"toss INVALID_REQUEST", `{"code":"INVALID_REQUEST","message":"잘못된 요청입니다."}`},
		{"toss NOT_MATCHES_CUSTOMER_KEY", `{"code":"NOT_MATCHES_CUSTOMER_KEY","message":"빌링 인증 고객키와 결제 요청 고객키가 일치하지 않습니다."}`},
		{"duplicate line item", `{"error":"Duplicate line item"}`},
		{"duplicate entries", `{"error":"items contains duplicate entries"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadRequest, body: tt.body})
			res, err := v.submit(t, idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			requireOutcome(t, res, err, idem.StateFailed, []error{idem.ErrFailed}, "", "")
			require.NotErrorIs(t, err, idem.ErrKeyConflict)
			v.requireKeys(t, "X-Idempotency-Key", "k", 1)
		})
	}
}

// Toss Payments answers a confirmation of a payment whose confirmation is
// still running 400 ALREADY_PROCESSING_REQUEST ("진행중인 요청이 있습니다",
// a request in progress; its words in Korean unless asked for English),
// the in-progress sibling of ALREADY_PROCESSED_PAYMENT
// (docs.tosspayments.com/reference/error-codes, 결제 승인). Behind a
// sidecar that retries the 503 of a reset, the sidecar's copy of our first
// attempt arrives while our first copy confirms the payment: ErrFailed told
// the caller the payment failed while it was being taken. It is a request
// in flight under the key's payment (ReviewKeyInUse to a first attempt, as
// a 409 in flight is), never resent, never failed.
func TestRequestInProgressRefusalToAFirstAttemptWithTheKeyInAHeader(t *testing.T) {
	const body = `{"paymentKey":"5zJ4xY7m0kODnyRpQWGrN2xqGlNvLrKwv1M9ENjbeoPaZdL6","orderId":"a4CWyWY5m89PNh7xJwhk1","amount":15000}`
	for refusal, words := range map[string]string{
		`{"code":"ALREADY_PROCESSING_REQUEST","message":"진행중인 요청이 있습니다."}`: "400: ALREADY_PROCESSING_REQUEST: 진행중인 요청이 있습니다.",
		`{"code":"already_processing_request"}`:                            "400: Bad Request",
	} {
		t.Run(refusal, func(t *testing.T) {
			o := &orderIDDesk{member: "paymentKey", header: "Idempotency-Key", refusal: refusal, held: map[string]bool{}}
			sidecar := retryingSidecar(t, o.serve)
			c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyHeader("Idempotency-Key", idem.KeyBare))
			req := idem.Request{Key: "k-7", URL: sidecar.URL + "/v1/payments/confirm", Body: []byte(body)}

			// The server's words go with the attempt, for the person.
			requireLeftForAPerson(t, c, req, words)

			o.mu.Lock()
			defer o.mu.Unlock()
			require.Equal(t, 1, o.payments, "payments")
			require.Equal(t, []string{body, body}, o.bodies, "copies: ours and the sidecar's, the same bytes, nothing resent")
			require.Equal(t, []string{"k-7", "k-7"}, o.keys, "the key of each copy")
		})
	}
}
