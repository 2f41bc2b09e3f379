package idem

import "testing"

// TestSaysSubjectRunning: a clause that opens with what a request makes
// (an order, a payment, a transaction, a refund), a determiner at most
// before it, and says it is in progress or locked; not one about
// anything else, nor one where the subject is named later, nor one where
// the words qualify the subject or belong to another clause.
func TestSaysSubjectRunning(t *testing.T) {
	for body, want := range map[string]bool{
		`{"message":"Payment with this order id is in progress"}`:                       true,
		`{"error":"PAYMENT_IN_PROGRESS"}`:                                               true,
		`{"message":"A refund for this payment is already in progress."}`:               true,
		`{"message":"Order couldn't be placed: transaction is being processed"}`:        true,
		`{"message":"Transactions still processing for this order"}`:                    true,
		`{"message":"Account verification is in progress"}`:                             false,
		`{"message":"Settlement in progress, try after 30 minutes"}`:                    false,
		`{"message":"Maintenance in progress for payment services"}`:                    false,
		`{"status":"in_progress","message":"payment method invalid"}`:                   false,
		`{"message":"Token registration in progress"}`:                                  false,
		`{"message":"Account lock could not be obtained"}`:                              false,
		`{"message":"Payment failed"}`:                                                  false,
		`{"message":"Order cannot be modified as it is being processed."}`:              true,
		`{"message":"Order ID 2042130686722629633 is being processed"}`:                 true,
		`{"message":"Order is in progress, cannot create another"}`:                     true,
		`{"message":"Order ORD_98765 is being processed"}`:                              true,
		`{"message":"Order ORD-98765 is in progress"}`:                                  true,
		`{"message":"Transactions that are currently in progress cannot be refunded."}`: false,
		`{"message":"Transactions currently in progress cannot be refunded."}`:          false,
		`{"message":"Payment method verification in progress"}`:                         false,
		`{"message":"Payouts are not allowed while a KYC check is in progress"}`:        false,
		`{"message":"Refund cannot be created because the payment is in progress"}`:     false,
	} {
		if got := saysSubjectRunning([]byte(body)); got != want {
			t.Errorf("saysSubjectRunning(%s) = %v, want %v", body, got, want)
		}
	}
}
