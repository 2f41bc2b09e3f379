package idem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// worldlineKeyStore is Worldline Direct's CreatePayment as its docs
// describe its keys (docs.direct.worldline-solutions.com, Idempotent
// requests): for a key whose request completed, "Our server will respond
// with the same outcome as the original request, even with different
// payloads", every follow-up marked X-GCS-Idempotence-Request-Timestamp.
// Its answer wraps the payment, {"creationOutput":…, "payment": {"id",
// "paymentOutput": {"amountOfMoney": {"amount", "currencyCode"}, …},
// "status"}} (the SDKs' CreatePaymentResponse and PaymentOutput), for
// the request's "order": {"amountOfMoney": {…}}. surcharge, when not 0,
// is what the platform adds to a payment whose order asks for
// surcharging: "order.amountOfMoney … amount: The net amount (without
// the surcharge)" (Surcharging), the answer then giving the gross amount
// beside its surchargeSpecificOutput (modelled: the SDKs' PaymentOutput
// says only "Object containing amount and ISO currency code attributes").
func worldlineKeyStore(cutBefore, cutAfter int, surcharge int64, stored map[string]string) *keyReplayingServer {
	return worldlineReplaying(cutBefore, cutAfter, stored, func(b []byte, n int) string {
		var req struct {
			Order struct {
				worldlineAmount
				Surcharge json.RawMessage `json:"surchargeSpecificInput"`
			} `json:"order"`
		}
		_ = json.Unmarshal(b, &req)
		o, added := req.Order, int64(0)
		if o.Surcharge != nil {
			added = surcharge
		}
		return worldlinePayment(fmt.Sprintf("%d_0", 3066019730+n), o.AmountOfMoney.Amount, o.AmountOfMoney.CurrencyCode,
			o.References.MerchantReference, added)
	})
}

// worldlineReplaying is a Worldline Direct endpoint keeping its answers,
// made by answer, under X-GCS-Idempotence-Key and replaying them marked.
func worldlineReplaying(cutBefore, cutAfter int, stored map[string]string, answer func(body []byte, n int) string) *keyReplayingServer {
	return &keyReplayingServer{keyHeader: "X-GCS-Idempotence-Key", status: http.StatusCreated,
		marker:    http.Header{"X-Gcs-Idempotence-Request-Timestamp": {"1700000000000"}},
		cutBefore: cutBefore, cutAfter: cutAfter, stored: stored, make: answer}
}

// worldlineAmount is what a Worldline Direct request says it is for: its
// amountOfMoney and merchant's reference.
type worldlineAmount struct {
	AmountOfMoney struct {
		Amount       int64  `json:"amount"`
		CurrencyCode string `json:"currencyCode"`
	} `json:"amountOfMoney"`
	References struct {
		MerchantReference string `json:"merchantReference"`
	} `json:"references"`
}

// worldlinePayment is a CreatePayment answer for a captured card payment
// of amount (minor units) in currency, and surcharge on top of it.
func worldlinePayment(id string, amount int64, currency, reference string, surcharge int64) string {
	extra := ""
	if surcharge != 0 {
		extra = fmt.Sprintf(`,"surchargeSpecificOutput":{"mode":"on-behalf-of","surchargeAmount":{"amount":%d,"currencyCode":%q}}`, surcharge, currency)
	}
	return fmt.Sprintf(`{"creationOutput":{"isNewToken":false,"tokenizationSucceeded":false},"payment":{"id":%q,`+
		`"paymentOutput":{"amountOfMoney":{"amount":%d,"currencyCode":%q},"acquiredAmount":{"amount":%d,"currencyCode":%q},`+
		`"references":{"merchantReference":%q},"paymentMethod":"card","cardPaymentMethodSpecificOutput":{"paymentProductId":1,"authorisationCode":"8162"}%s},`+
		`"status":"CAPTURED","statusOutput":{"isCancellable":false,"statusCategory":"COMPLETED","statusCode":9,"isAuthorized":false,"isRefundable":true}}}`,
		id, amount+surcharge, currency, amount+surcharge, currency, reference, extra)
}

// worldlinePaymentOf is the id and status of the payment an answer wraps,
// {"payment": {"id", "status", …}}.
func worldlinePaymentOf(body []byte) (id, status string, err error) {
	var v struct {
		Payment *struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"payment"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Payment == nil || v.Payment.ID == "" {
		return "", "", fmt.Errorf("not a Worldline payment")
	}
	return v.Payment.ID, v.Payment.Status, nil
}

// decodeWorldlinePayment reads a CreatePayment answer: its payment's id
// and status.
func decodeWorldlinePayment(a *idem.Answer) (idem.Outcome, error) {
	id, status, err := worldlinePaymentOf(a.Body)
	if err != nil {
		return idem.Outcome{}, err
	}
	switch status {
	case "CAPTURED", "PENDING_CAPTURE":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, nil
	case "REJECTED":
		return idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: "rejected"}, nil
	}
	return idem.Outcome{State: idem.StateProcessing, ResourceID: id}, nil
}

// Worldline Direct replays the key's stored payment "even with different
// payloads", so a key that collided (another service's, or another
// order's whose business id named it first) is answered, after a send of
// ours that may have run (its connection cut), with another request's
// payment. Its payment under payment.paymentOutput was read nowhere: the
// replay of 250000 USD (or 2500 EUR) settled succeeded as our 1000 EUR,
// 2 posts, no payment of ours. Now flagged ReviewKeyInUse, never resent.
// Our own payment replayed still settles, surcharged too: its order's
// amount is the net one, the answer's the gross beside the surcharge it
// counts, so the answer's amount less its surchargeAmount is compared. A
// surcharge our request did not ask for leaves the amount compared as it
// is (it was the reason to skip it, so another request's surcharged
// payment settled as ours: 2 posts, none of ours made).
func TestWorldlineReplayedPaymentOfAnotherRequest(t *testing.T) {
	plain := `{"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","token":"0ca037cc-9cb0-4a9f-8c3b-6c9e5d1e2f30"},` +
		`"order":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"},"references":{"merchantReference":"order-1001"}}}`
	surcharged := `{"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","token":"0ca037cc-9cb0-4a9f-8c3b-6c9e5d1e2f30"},` +
		`"order":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"},"references":{"merchantReference":"order-1001"},"surchargeSpecificInput":{"mode":"on-behalf-of"}}}`
	key, decode := idem.WithKeyHeader("X-GCS-Idempotence-Key", idem.KeyBare), idem.WithDecoder(decodeWorldlinePayment)
	submit := func(t *testing.T, f *keyReplayingServer, body string) (*idem.Client, *idem.Result, error) {
		srv := httptest.NewServer(http.HandlerFunc(f.serve))
		t.Cleanup(srv.Close)
		c := clientFor(t, srv, idemtest.NewClock(epoch), key, decode)
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v2/1234/payments", Body: []byte(body)})
		return c, res, err
	}
	for _, tt := range []struct {
		name, body, other, how string
	}{
		{name: "another currency and amount", body: plain, other: worldlinePayment("3066019730_0", 250000, "USD", "order-0950", 0),
			how: `amountOfMoney.currencyCode "USD", not the request's order.amountOfMoney.currencyCode "EUR"`},
		{name: "another amount", body: plain, other: worldlinePayment("3066019730_0", 2500, "EUR", "order-0950", 0),
			how: `amountOfMoney.amount "2500", not the request's order.amountOfMoney.amount "1000"`},
		{name: "ours surcharged, another currency", body: surcharged, other: worldlinePayment("3066019730_0", 1000, "USD", "order-0950", 30),
			how: `amountOfMoney.currencyCode "USD", not the request's order.amountOfMoney.currencyCode "EUR"`},
		// Surcharging is asked in the request ("The following properties
		// define the surcharge of your order in a
		// CreateHostedCheckout/CreatePayment request", Surcharging): a
		// surcharged payment for a plain request is another request's.
		{name: "plain request, another amount, surcharged answer", body: plain, other: worldlinePayment("3066019730_0", 2500, "EUR", "order-0950", 30),
			how: `amountOfMoney.amount "2530", not the request's order.amountOfMoney.amount "1000"`},
		// The answer's gross amount less its surchargeAmount is the
		// order's net amount: 2530 less 30 is not our 1000.
		{name: "ours surcharged, another net amount", body: surcharged, other: worldlinePayment("3066019730_0", 2500, "EUR", "order-0950", 30),
			how: `amountOfMoney.amount less its surcharge "2500", not the request's order.amountOfMoney.amount "1000"`},
		// Surcharges apply to commercial cards only ("You can apply
		// surcharges only to commercial cards", Surcharging): an answer
		// with no surchargeSpecificOutput carries the net amount.
		{name: "ours surcharged, none applied, another amount", body: surcharged, other: worldlinePayment("3066019730_0", 2500, "EUR", "order-0950", 0),
			how: `amountOfMoney.amount less its surcharge "2500", not the request's order.amountOfMoney.amount "1000"`},
	} {
		t.Run(tt.name+": after a cut send", func(t *testing.T) {
			f := worldlineKeyStore(1, 0, 0, map[string]string{"k": tt.other})
			c, res, err := submit(t, f, tt.body)
			requireForeignKey(t, res, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, tt.body, 2, nil)
			// Flagged, it is not sent again.
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, tt.body, 2, nil)
		})
	}
	for _, tt := range []struct {
		name, body string
		surcharge  int64
	}{
		{name: "as asked", body: plain},
		{name: "surcharged: the gross amount", body: surcharged, surcharge: 30},
	} {
		t.Run("our own payment replayed, "+tt.name+": settles", func(t *testing.T) {
			f := worldlineKeyStore(0, 1, tt.surcharge, map[string]string{})
			_, res, err := submit(t, f, tt.body)
			requireOwnReplaySettled(t, res, err, "3066019731_0")
			f.requireSent(t, tt.body, 2, []string{"k"})
		})
	}
}
