package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/idemkit/idem"
)

// decodeAdyen reads the payment result of Adyen's /payments: no "id" and
// no "state", but a "resultCode" and the payment's "pspReference"
// (https://docs.adyen.com/online-payments/build-your-integration/payment-result-codes).
func decodeAdyen(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		PSPReference  string `json:"pspReference"`
		ResultCode    string `json:"resultCode"`
		RefusalReason string `json:"refusalReason"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, fmt.Errorf("adyen: %w", err)
	}
	switch v.ResultCode {
	case "Authorised":
		if v.PSPReference == "" {
			return idem.Outcome{}, fmt.Errorf("adyen: %s without a pspReference", v.ResultCode)
		}
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.PSPReference}, nil
	case "Refused", "Cancelled":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.PSPReference, Reason: v.ResultCode + ": " + v.RefusalReason}, nil
	case "Pending", "Received", "RedirectShopper", "IdentifyShopper", "ChallengeShopper", "PresentToShopper":
		// The payment waits for its method or for the shopper: Adyen's
		// webhook settles it (Client.Confirm).
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.PSPReference}, nil
	}
	// "Error" (final to Adyen, but an error of the processing, not a
	// refusal), "PartiallyAuthorised", a code added later: nothing this
	// decoder settles on. idem asks again, never takes it for an outcome,
	// and the webhook or a person settles it.
	return idem.Outcome{}, fmt.Errorf("adyen: resultCode %q settles nothing", v.ResultCode)
}

// DecodeJSON does not read Adyen's payment results: they carry neither
// "state" nor "id", so a client with the default decoder leaves every
// Adyen payment unknown, never settled. A Decoder that reads
// "resultCode" settles them; pass it with WithDecoder. Adyen's result
// codes are its own words, several of them neither success nor failure,
// so the default decoder does not guess at them.
func ExampleWithDecoder_adyen() {
	_ = idem.WithDecoder(decodeAdyen) // with idem.New or idem.Open
	for _, body := range []string{
		`{"pspReference":"993617895204576J","resultCode":"Authorised","amount":{"currency":"EUR","value":1000}}`,
		`{"pspReference":"V4HZ4RBFJGXXGN82","resultCode":"Refused","refusalReason":"Not enough balance","refusalReasonCode":"12"}`,
		`{"resultCode":"RedirectShopper","action":{"type":"redirect","url":"https://checkoutshopper-test.adyen.com/"}}`,
		`{"pspReference":"881617895204577B","resultCode":"Error","refusalReason":"Acquirer Error"}`,
	} {
		out, err := decodeAdyen(&idem.Answer{StatusCode: http.StatusOK, Body: []byte(body)})
		if err != nil {
			fmt.Println("proves nothing:", err)
			continue
		}
		fmt.Printf("%s %q %q\n", out.State, out.ResourceID, out.Reason)
	}
	// Output:
	// succeeded "993617895204576J" ""
	// failed "V4HZ4RBFJGXXGN82" "Refused: Not enough balance"
	// processing "" ""
	// proves nothing: adyen: resultCode "Error" settles nothing
}
