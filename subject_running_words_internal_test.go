package idem

import "testing"

// TestSaysSubjectRunning: a clause that opens with what a request makes
// (an order, a payment, a transaction, a refund), a determiner at most
// before it, and says it is in progress or locked; not one about
// anything else, nor one where the subject is named later.
func TestSaysSubjectRunning(t *testing.T) {
	for body, want := range map[string]bool{
		`{"message":"Payment with this order id is in progress"}`:                true,
		`{"error":"PAYMENT_IN_PROGRESS"}`:                                        true,
		`{"message":"A refund for this payment is already in progress."}`:        true,
		`{"message":"Order couldn't be placed: transaction is being processed"}`: true,
		`{"message":"Transactions still processing for this order"}`:             true,
		`{"message":"Account verification is in progress"}`:                      false,
		`{"message":"Settlement in progress, try after 30 minutes"}`:             false,
		`{"message":"Maintenance in progress for payment services"}`:             false,
		`{"status":"in_progress","message":"payment method invalid"}`:            false,
		`{"message":"Token registration in progress"}`:                           false,
		`{"message":"Account lock could not be obtained"}`:                       false,
		`{"message":"Payment failed"}`:                                           false,
	} {
		if got := saysSubjectRunning([]byte(body)); got != want {
			t.Errorf("saysSubjectRunning(%s) = %v, want %v", body, got, want)
		}
	}
}
