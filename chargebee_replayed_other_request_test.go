package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// chargebeePaymentIntent is Chargebee's answer to POST /payment_intents,
// its payment intent alone under "payment_intent" (chargebee-node's
// PaymentIntent: id, status "inited", currency_code, amount, …).
func chargebeePaymentIntent(id, amount, currency string) string {
	return fmt.Sprintf(`{"payment_intent":{"id":%q,"status":"inited","currency_code":%q,"amount":%s,`+
		`"gateway_account_id":"gw_AzZlGJSpZ0e3b1","expires_at":1700001800,"created_at":1700000000,"modified_at":1700000000,`+
		`"object":"payment_intent","customer_id":"AzZlGJSpZ0e3b2"}}`, id, currency, amount)
}

// decodeChargebeePaymentIntent reads a payment intent made: inited, the
// intent exists for the checkout to complete.
func decodeChargebeePaymentIntent(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		PaymentIntent *struct {
			ID string `json:"id"`
		} `json:"payment_intent"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.PaymentIntent == nil || v.PaymentIntent.ID == "" {
		return idem.Outcome{}, fmt.Errorf("not a Chargebee payment intent")
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.PaymentIntent.ID}, nil
}

// Chargebee answers a key it holds with "the response for that record",
// marked chargebee-idempotency-replayed: true
// (apidocs.chargebee.com/docs/api/idempotency); whether it compares the
// later request's body with the first's it does not say (modelled: it
// does not). Its payment intents are created from a form (amount,
// currency_code) and answered wrapped, {"payment_intent": {…}}, which
// the comparison read nowhere, nor the form's currency_code: after a cut
// send, the replay of another request's intent (2500 USD, or 1000 EUR,
// for our 1000 USD) was taken as ours, 2 posts, no intent of ours. Now
// flagged ReviewKeyInUse and never resent; our own replayed still
// settles.
func TestChargebeeReplayedPaymentIntentOfAnotherRequest(t *testing.T) {
	body := url.Values{"amount": {"1000"}, "currency_code": {"USD"}, "customer_id": {"AzZlGJSpZ0e3b2"}}.Encode()
	key, decode := idem.WithKeyHeader("Chargebee-Idempotency-Key", idem.KeyBare), idem.WithDecoder(decodeChargebeePaymentIntent)
	store := func(cutBefore, cutAfter int, stored map[string]string) *keyReplayingServer {
		return &keyReplayingServer{keyHeader: "Chargebee-Idempotency-Key", status: http.StatusOK,
			marker:    http.Header{"Chargebee-Idempotency-Replayed": {"true"}},
			cutBefore: cutBefore, cutAfter: cutAfter, stored: stored,
			make: func(b []byte, n int) string {
				form, _ := url.ParseQuery(string(b))
				return chargebeePaymentIntent(fmt.Sprintf("pi_%d", n), form.Get("amount"), form.Get("currency_code"))
			}}
	}
	submit := func(t *testing.T, f *keyReplayingServer) (*idem.Client, *idem.Result, error) {
		srv := httptest.NewServer(http.HandlerFunc(f.serve))
		t.Cleanup(srv.Close)
		c := clientFor(t, srv, idemtest.NewClock(epoch), key, decode)
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/api/v2/payment_intents", Body: []byte(body),
			Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}})
		return c, res, err
	}
	for _, tt := range []struct{ name, other, how string }{
		{name: "another amount", other: chargebeePaymentIntent("pi_other", "2500", "USD"),
			how: `amount "2500", not the request's amount "1000"`},
		{name: "another currency", other: chargebeePaymentIntent("pi_other", "1000", "EUR"),
			how: `currency_code "EUR", not the request's currency_code "USD"`},
	} {
		t.Run(tt.name+": after a cut send", func(t *testing.T) {
			f := store(1, 0, map[string]string{"k": tt.other})
			c, res, err := submit(t, f)
			requireForeignKey(t, res, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, body, 2, nil)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, body, 2, nil)
		})
	}
	t.Run("our own intent replayed: settles", func(t *testing.T) {
		f := store(0, 1, map[string]string{})
		_, res, err := submit(t, f)
		requireOwnReplaySettled(t, res, err, "pi_1")
		f.requireSent(t, body, 2, []string{"k"})
	})
}
