package idem_test

import (
	"net/http"
	"testing"
)

// TestStateRefusalEndsWithItsSentence: a "cannot" of a sentence, or of a
// code's member, ahead of the one that says the subject exists already
// refuses nothing for that state: the second sentence says on its own
// that the request's subject is there, which a copy of it may have made.
// idem looked back eight words whatever stood between, and read Paytm's
// 617 "Refund Already Raised" (business.paytm.com, refund response codes)
// behind an "Unable to refund." as a refund refused for the payment's
// state: ErrFailed, inviting a second refund under a new key. The words
// before Paytm's, and the code member of the second body, are modelled.
func TestStateRefusalEndsWithItsSentence(t *testing.T) {
	for _, body := range []string{
		`{"message":"Unable to refund. Refund Already Raised"}`,
		`{"code":"Cannot cancel","message":"Order already exists"}`,
	} {
		t.Run(body, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadRequest, body: body})
			res, err := v.submit(t)
			requireForeignKey(t, res, err)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}
