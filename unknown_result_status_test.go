package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// decodeAntomPay reads Antom's (Alipay+) pay answer as its docs say:
// result.resultStatus S is the payment made, F its failure, U unknown
// ("PAYMENT_IN_PROCESS", "UNKNOWN_EXCEPTION": inquire, or retry with the
// same paymentRequestId), never a failure (docs.antom.com, pay and
// inquiryPayment: "S: Success, F: Failure, U: Unknown").
func decodeAntomPay(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Result struct {
			ResultStatus string `json:"resultStatus"`
			ResultCode   string `json:"resultCode"`
		} `json:"result"`
		PaymentID string `json:"paymentId"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch v.Result.ResultStatus {
	case "S":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.PaymentID}, nil
	case "F":
		return idem.Outcome{State: idem.StateFailed, Reason: v.Result.ResultCode}, nil
	}
	return idem.Outcome{State: idem.StateProcessing, ResourceID: v.PaymentID, Reason: v.Result.ResultCode}, nil
}

// An Antom payment whose first answer a gateway lost (502 after the
// payment was taken), then answered U PAYMENT_IN_PROCESS to the resend
// under the same paymentRequestId, then S: one payment, three sends of
// the same bytes, succeeded; the U is never a failure nor a new payment.
func TestUnknownResultStatusAfterALostAnswerSettlesOnePayment(t *testing.T) {
	const id = "2019112719074101000700000088888"
	var mu sync.Mutex
	var payments, sends int
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		sends++
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case payments == 0:
			payments++
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		case sends == 2:
			_, _ = io.WriteString(w, `{"result":{"resultCode":"PAYMENT_IN_PROCESS","resultStatus":"U","resultMessage":"payment in process"},"paymentRequestId":"pr-7f3c9a","paymentId":"`+id+`"}`)
		default:
			_, _ = io.WriteString(w, `{"result":{"resultCode":"SUCCESS","resultStatus":"S","resultMessage":"success"},"paymentRequestId":"pr-7f3c9a","paymentId":"`+id+`"}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeAntomPay))
	body := `{"productCode":"ONLINE_PAYMENT","paymentRequestId":"pr-7f3c9a","order":{"referenceOrderId":"ord-1"},"paymentAmount":{"currency":"USD","value":"100"}}`

	res, err := c.Submit(t.Context(), idem.Request{Key: "pr-7f3c9a", URL: srv.URL + "/ams/api/v1/payments/pay", Body: []byte(body)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, id, res.ResourceID)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, payments, "payments")
	require.Equal(t, []string{body, body, body}, bodies, "sends: the lost one, the U, the S")
}
