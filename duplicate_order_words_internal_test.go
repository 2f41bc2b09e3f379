package idem

import (
	"testing"

	"github.com/idemkit/idem/journal"
)

// TestSaysDuplicateByKeyHeader: with the key in a header, answerOf reads
// a 2xx the decoder failed with duplicateWords under the header's name.
// The words must still be about the order, the request or the key, as
// with a body member's name: a validation error about the body's parts
// is the order's own failure.
func TestSaysDuplicateByKeyHeader(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		// WPG's refusal of an orderCode it holds, in its 200 XML reply.
		{`<?xml version="1.0" encoding="UTF-8"?><paymentService version="1.4" merchantCode="M"><reply>` +
			`<error code="5"><![CDATA[Duplicate Order]]></error></reply></paymentService>`, true},
		// Authorize.Net's response code 3, reason 11, in a 200.
		{`{"transactionResponse":{"responseCode":"3","errors":[{"errorCode":"11","errorText":"A duplicate transaction has been submitted."}]}}`, true},
		{`{"error":"Duplicate Idempotency-Key"}`, true},
		// dLocal's 5009 (docs.dlocal.com/reference/http-errors-payments).
		{`{"code":5009,"message":"Order ID is duplicated."}`, true},
		// Toss Payments' codes, its words in Korean unless asked for
		// English (docs.tosspayments.com/reference/error-codes).
		{`{"code":"DUPLICATED_ORDER_ID","message":"이미 승인 및 취소가 진행된 중복된 주문번호 입니다. 다른 주문번호로 진행해주세요."}`, true},
		{`{"code":"ALREADY_PROCESSED_PAYMENT","message":"이미 처리된 결제 입니다."}`, true},
		{`{"code":"ALREADY_PROCESSED_PAYMENT","message":"This is a payment that has already been processed."}`, true},
		{`{"code":"ALREADY_CANCELED_PAYMENT","message":"이미 취소된 결제 입니다."}`, false},
		// An order paid already may be a copy of this payment's doing;
		// a cancel refused for it is refused for the order's state.
		{`{"error":{"message":"Order already paid"}}`, true},
		{`{"error":{"message":"This order has already been paid"}}`, true},
		{`{"error":"Cannot cancel an order that is already paid"}`, false},
		{`{"code":"ALREADY_USED_EMAIL"}`, false},
		{`{"error":"The card that was already used is blocked"}`, false},
		// WPG's batch service: a batch is no order.
		{`<batchService version="1.0" merchantCode="M"><error code="5">Duplicate batch</error></batchService>`, false},
		{`{"error":"Duplicate line item"}`, false},
		{`{"error":"items contains duplicate entries"}`, false},
		{`{"error":"duplicate email"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), DefaultKeyHeader, "k", true); got != tc.want {
			t.Errorf("duplicateWords(%s, %q) = %v, want %v", tc.body, DefaultKeyHeader, got, tc.want)
		}
	}
}

// TestSaysDuplicateRefundToken: with the key in a form's var2, PayU
// India's refund token (docs.payu.in, Error Codes for Refund Initiation),
// its refusals of a token it holds say the refund under it exists; other
// words about a token, or "already logged" about anything but the
// request, do not.
func TestSaysDuplicateRefundToken(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"status":0,"msg":"Token already exists","error_code":106}`, true},
		{`{"status":0,"msg":"Request is already logged","error_code":109}`, true},
		{`{"status":0,"msg":"Invalid payuid","mihpayid":""}`, false},
		{`{"status":0,"msg":"Token expired"}`, false},
		{`{"status":0,"msg":"User is already logged in"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "var2", "rfnd-7f3c9a", true); got != tc.want {
			t.Errorf("duplicateWords(%s, var2) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// TestSaysDuplicateNotUniqueCode: with the key in the body's extOrderId,
// PayU's ERROR_ORDER_NOT_UNIQUE, a code with no words beside it, says the
// order under it exists; a code saying another member is not unique does
// not.
func TestSaysDuplicateNotUniqueCode(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"status":{"statusCode":"ERROR_ORDER_NOT_UNIQUE"}}`, true},
		{`{"code":"ORDER_ID_NOT_UNIQUE"}`, true},
		{`{"code":"ExtOrderIdNotUnique"}`, true},
		{`{"status":{"statusCode":"ERROR_USER_NOT_UNIQUE"}}`, false},
		{`{"code":"EMAIL_NOT_UNIQUE"}`, false},
		{`{"code":"ORDER_LINES_NOT_UNIQUE"}`, false},
		{`{"code":"NOT_UNIQUE"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "extOrderId", "ord-42", true); got != tc.want {
			t.Errorf("duplicateWords(%s, extOrderId) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// TestSaysDuplicateRefund: a refund is what a refund API's key names, as
// an order is an order API's. Paytm's 617 "Refund Already Raised" and 629
// "Refund is already Successful" to a refId it holds (its refund response
// codes), Optum Convenient Checkout's "Refund already exists for the
// given merchantTransactionId." (Refund API Error Codes) and Everifin's
// REFUND_DUPLICATED say the refund under it exists; a payment already
// refunded, a refund refused for its amount, another refund in progress
// or a dispute already raised do not.
func TestSaysDuplicateRefund(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"body":{"refId":"rfd-0b7e41","resultInfo":{"resultStatus":"TXN_FAILURE","resultCode":"617","resultMsg":"Refund Already Raised"}}}`, true},
		{`{"body":{"refId":"rfd-0b7e41","resultInfo":{"resultStatus":"TXN_FAILURE","resultCode":"629","resultMsg":"Refund is already Successful"}}}`, true},
		{`{"title":"BAD_REQUEST","status":400,"detail":"Refund already exists for the given merchantTransactionId."}`, true},
		{`{"code":"REFUND_DUPLICATED","description":"The same refund was already created."}`, true},
		{`{"title":"REFUND_ERROR","detail":"This payment is already refunded"}`, false},
		{`{"title":"INVALID_REQUEST","detail":"Refund amount cannot be more than the un-refunded amount of the original payment"}`, false},
		{`{"body":{"resultInfo":{"resultStatus":"TXN_FAILURE","resultCode":"626","resultMsg":"Another Refund on same order is already in Progress, please retry after few minutes"}}}`, false},
		{`{"error":"Dispute already raised for this payment"}`, false},
		{`{"error":"refund_items contains duplicate entries"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "refId", "rfd-0b7e41", true); got != tc.want {
			t.Errorf("duplicateWords(%s, refId) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// TestSaysDuplicateUUID: a duplicate UUID alone is the request's own
// identifier (Trustly's 688 ERROR_DUPLICATE_UUID, "This UUID has been
// used before"), whatever member holds the key; another thing's UUID, or
// UUIDs a body holds twice, are not.
func TestSaysDuplicateUUID(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"version":"1.1","error":{"name":"JSONRPCError","code":688,"message":"ERROR_DUPLICATE_UUID"}}`, true},
		{`{"error":"Duplicate UUID"}`, true},
		{`{"error":"beneficiary_uuid is duplicated"}`, false},
		{`{"error":"items contain duplicate uuids"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "MessageID", "payout-7f3c9a", true); got != tc.want {
			t.Errorf("duplicateWords(%s, MessageID) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// TestSaysDuplicateWithTheSameID: with the key in the body's orderId, LINE
// Pay's 1172 (developers.line.biz, LINE Pay error codes) says the order
// under it exists, in the words of a record "with the same order
// number"; "with the same" anything but an id does not.
func TestSaysDuplicateWithTheSameID(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"returnCode":"1172","returnMessage":"There is a record of transaction with the same order number."}`, true},
		{`{"returnCode":"1152","returnMessage":"There is a history of transactions with the same transactionId."}`, true},
		{`{"error":"A payment with the same orderId exists"}`, true},
		{`{"error":"Refund currency must be the same as the payment's"}`, false},
		{`{"error":"Cannot pay with the same card twice"}`, false},
		{`{"error":"Items with the same order cannot be split"}`, false},
		{`{"error":"Packages with the same package id"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "orderId", "order-7f3c9a", true); got != tc.want {
			t.Errorf("duplicateWords(%s, orderId) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// TestSaysDuplicateCodeEndingInSubject: with the key in the body's
// merchantPaymentId, PayPay's DUPLICATE_DYNAMIC_QR_REQUEST (its OPA SDKs'
// error table) names the request as the code's last part; a code placing
// the duplicate inside the request, or ending in no subject, does not.
func TestSaysDuplicateCodeEndingInSubject(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"resultInfo":{"code":"DUPLICATE_DYNAMIC_QR_REQUEST","message":"Duplicate Dynamic QR request error","codeId":"01652073"},"data":null}`, true},
		{`{"code":"DUPLICATE_FIELD_IN_REQUEST"}`, false},
		{`{"code":"DUPLICATE_LINE_ITEM"}`, false},
		{`{"code":"DUPLICATE_ITEMS_OF_ORDER"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "merchantPaymentId", "mp-7f3c9a", true); got != tc.want {
			t.Errorf("duplicateWords(%s, merchantPaymentId) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// TestSaysDuplicateKeyMemberConflict: with the key in the body's
// clientOrderId, Bitvavo's 400 errorCode 220 "clientOrderId conflict
// within the market." (docs.bitvavo.com/docs/errors) says the id's order
// exists; a conflict of anything else the order holds does not.
func TestSaysDuplicateKeyMemberConflict(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"errorCode":220,"error":"clientOrderId conflict within the market."}`, true},
		{`{"error":"client_order_id conflicts with an open order"}`, true},
		{`{"error":"order conflict: position is reduce-only"}`, false},
		{`{"error":"price conflicts with the market's tick size"}`, false},
		{`{"error":"timeInForce conflict with postOnly"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "clientOrderId", "2be7d0df-d5dc-4b53-a250-3376f3b393e6", true); got != tc.want {
			t.Errorf("duplicateWords(%s, clientOrderId) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// TestSaysDuplicateAlreadyRegistered: with the key in the body's cOID,
// Interactive Brokers' "Local order ID=<cOID> is already registered."
// (the refusal Voyz/ibind's handle_questions matches) says the id's order
// exists, the id itself between its subject and the verbs; what else is
// "already registered" (an email, a device) names no order. A cOID is
// "some arbitrary string" (the Client Portal OpenAPI spec's
// OrderRequest.cOID): one holding a dot, a colon or a slash is split into
// several words as the refusal's are, and all of them are passed over
// together; another id so split, or one that only ends as ours does, is
// not passed over.
func TestSaysDuplicateAlreadyRegistered(t *testing.T) {
	const key, dotted = "aapl-buy-20261205-7f3c9a", "AAPL.buy:20261205/1"
	for _, tc := range []struct {
		key, body string
		want      bool
	}{
		{key, `{"error":"Order couldn't be submitted: Local order ID=aapl-buy-20261205-7f3c9a is already registered."}`, true},
		{key, `{"error":"Order ID already registered"}`, true},
		{key, `{"error":"Email is already registered"}`, false},
		{key, `{"error":"Device aapl-buy-20261205-7f3c9a is already registered"}`, false},
		{key, `{"error":"Local order ID=other-order-1 is already registered."}`, false},
		{dotted, `{"error":"Order couldn't be submitted: Local order ID=AAPL.buy:20261205/1 is already registered."}`, true},
		{dotted, `{"error":"Order couldn't be submitted: Local order ID=MSFT.buy:20261205/1 is already registered."}`, false},
		{dotted, `{"error":"Local order ID=1 is already registered."}`, false},
		{dotted, `{"error":"Device AAPL.buy:20261205/1 is already registered"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "cOID", tc.key, true); got != tc.want {
			t.Errorf("duplicateWords(%s, cOID, %s) = %v, want %v", tc.body, tc.key, got, tc.want)
		}
	}
}

// TestSaysDuplicateKeyOfACommonWord: the key is passed over as an id
// only where it stands as one, a distinctive key or one after an id's
// name: a key that is a common word is read as that word, so the
// reading of a refusal does not turn on it.
func TestSaysDuplicateKeyOfACommonWord(t *testing.T) {
	for _, tc := range []struct {
		key, body string
		want      bool
	}{
		{"order", `{"errors":["Client order has already been taken"]}`, true},
		{"order", `{"error":"Order already exists"}`, true},
		{"payment", `{"error":"Payment already exists"}`, true},
		{"email", `{"errors":["Order email has already been taken"]}`, false},
		{"email", `{"error":"Email is already registered"}`, false},
		// After an id's name, any key is passed over (Interactive
		// Brokers' "Local order ID=<cOID>"), a word too.
		{"order", `{"error":"Local order ID=order is already registered."}`, true},
		{"abcdef", `{"error":"Local order ID=abcdef is already registered."}`, true},
		{"email", `{"error":"Device ID=email is already registered."}`, false},
		// A key with a digit or a sign in it is no word: an id wherever
		// it stands, an order number after its subject too.
		{"1001", `{"message":"Order 1001 already exists for user 42"}`, true},
		{"INV-A", `{"message":"Order INV-A already exists"}`, true},
		{"ord_7", `{"message":"Order ord_7 has already been placed"}`, true},
		{"1001", `{"message":"Order 1002 already exists"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "client_order_id", tc.key, true); got != tc.want {
			t.Errorf("duplicateWords(%s, client_order_id, %q) = %v, want %v", tc.body, tc.key, got, tc.want)
		}
	}
}

// TestSaysDuplicateRefusedForState: "cannot" do to a subject what undoes
// or alters it, the subject already in another state, is a refusal for
// that state, not a duplicate; a token of a device or credential is no
// subject. A capture refused as "already processed", a create as
// "already exists", a card token "already used" stay duplicates.
func TestSaysDuplicateRefusedForState(t *testing.T) {
	for body, want := range map[string]bool{
		`{"message":"Cannot cancel a payment that has already been processed."}`:  false,
		`{"message":"Can't void a transaction that has already been processed"}`:  false,
		`{"message":"Unable to update an order that has already been placed"}`:    false,
		`{"message":"Device token is already registered"}`:                        false,
		`{"message":"Push token already exists"}`:                                 false,
		`{"message":"Cannot capture a payment that has already been processed."}`: true,
		`{"message":"Cannot create order: order already exists"}`:                 true,
		`{"message":"Card token is already used"}`:                                true,
		`{"message":"This is a payment that has already been processed."}`:        true,
	} {
		if got := duplicateWords([]byte(body), DefaultKeyHeader, "k", true); got != want {
			t.Errorf("duplicateWords(%s, %q) = %v, want %v", body, DefaultKeyHeader, got, want)
		}
	}
}

// TestSaysDuplicatePaidAndUtilized: Midtrans's 406 to an order_id it
// holds, "order_id has been paid and utilized, please use another order
// ID" (docs.midtrans.com/docs/error-code-and-response-code), is about the
// key's member; the same words about anything else are not.
func TestSaysDuplicatePaidAndUtilized(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"status_code":"406","status_message":"order_id has been paid and utilized, please use another order ID"}`, true},
		{`{"status_code":"406","status_message":"Order ID has been paid and utilised"}`, true},
		{`{"status_code":"406","status_message":"Voucher has been paid and utilized"}`, false},
		{`{"status_code":"406","status_message":"order_id has been utilized for reporting"}`, false},
	} {
		if got := duplicateWords([]byte(tc.body), "transaction_details.order_id", "order-7", true); got != tc.want {
			t.Errorf("duplicateWords(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

// "Already paid" is a duplicate's words to a request that may pay, whose
// copy may have paid the order; not to one changing the order's state (a
// cancel, a refund, a reversal), whose copy pays nothing. Other words
// read the same to both.
func TestAlreadyPaidIsADuplicateOnlyToAPayment(t *testing.T) {
	for _, tc := range []struct {
		url, body string
		want      bool
	}{
		{"https://api.example/v1/orders/o-1/payments", `{"message":"Order already paid"}`, true},
		{"https://api.example/v1/charge", `{"code":"ORDER_ALREADY_PAID"}`, true},
		{"https://api.example/v1/orders/o-1/cancel", `{"message":"Order already paid"}`, false},
		{"https://api.example/v1/orders/o-1/cancellations", `{"code":"ORDER_ALREADY_PAID"}`, false},
		{"https://api.example/v1/payments/p-1/refunds", `{"message":"Payment already paid"}`, false},
		{"https://api.example/v1/payments/p-1/reversals?x=1", `{"message":"Order already paid"}`, false},
		// The key as the last segment names the request, not an action.
		{"https://api.example/v1/orders/cancel-7", `{"message":"Order already paid"}`, true},
		{"https://api.example/v1/orders/o-1/cancel", `{"message":"Order ID already exists"}`, true},
	} {
		rec := &journal.Record{Key: "cancel-7", URL: tc.url}
		if got := saysDuplicateTo(rec, []byte(tc.body), "Idempotency-Key"); got != tc.want {
			t.Errorf("saysDuplicateTo(%s, %s) = %v, want %v", tc.url, tc.body, got, tc.want)
		}
	}
}
