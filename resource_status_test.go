package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A plain resource object carries a status of its own: a payment created
// declined is a failed payment, whatever the HTTP status says.
func TestDecodeJSONReadsResourceStatus(t *testing.T) {
	requireDecodes(t, []decodeRow{
		{`{"id":"pay_1","status":"Declined"}`, 201, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "Declined"}, true},
		{`{"id":"pay_1","status":"DECLINED"}`, 201, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "DECLINED"}, true},
		{`{"id":"pay_1","status":"rejected"}`, 201, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "rejected"}, true},
		{`{"id":"pay_1","status":"failed"}`, 200, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "failed"}, true},
		{`{"id":"pay_1","status":"refused"}`, 200, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "refused"}, true},
		{`{"id":"pay_1","status":"denied"}`, 200, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "denied"}, true},
		// 202 says the work is not done, but a declined resource is done.
		{`{"id":"pay_1","status":"declined"}`, 202, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "declined"}, true},
		// An error of the call's is no outcome: query, never settle.
		{`{"id":"req_1","status":"error"}`, 200, idem.Outcome{}, false},
		{`{"id":"req_1","status":"Errored"}`, 200, idem.Outcome{}, false},
		// A status a created resource reaches later is no failure of the
		// call: the order was made, and "failed" could have it made again.
		{`{"id":"ord_1","status":"canceled"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		{`{"id":"ord_1","status":"CANCELLED"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		{`{"id":"pay_1","status":"voided"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "pay_1"}, true},
		{`{"id":"pay_1","status":"refunded"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "pay_1"}, true},
		{`{"id":"cs_1","status":"expired"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "cs_1"}, true},
		// Any other status is the resource created, as before.
		{`{"id":"ch_1","status":"succeeded"}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ch_1"}, true},
		{`{"id":"ch_1","status":"paid"}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ch_1"}, true},
		{`{"id":"ord_1","status":"pending"}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		{`{"id":"ord_1","status":7}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		{`{"id":"ord_1","status":null}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		// A PayPal order's own status says COMPLETED whatever became of
		// its payments: they say it.
		{`{"id":"O1","status":"COMPLETED","purchase_units":[{"payments":{"captures":[{"id":"C1","status":"COMPLETED"}]}}]}`, 201,
			idem.Outcome{State: idem.StateSucceeded, ResourceID: "O1"}, true},
		{`{"id":"O1","status":"COMPLETED","purchase_units":[{"payments":{"authorizations":[{"id":"A1","status":"DENIED"}]}}]}`, 201,
			idem.Outcome{State: idem.StateFailed, ResourceID: "O1", Reason: "DENIED"}, true},
		{`{"id":"O1","status":"COMPLETED","purchase_units":[{"payments":{"captures":[{"status":"COMPLETED"}]}},` +
			`{"payments":{"captures":[{"status":"DECLINED"}]}}]}`, 201, idem.Outcome{}, false},
		// idem's own protocol ("state") decides when it is there.
		{`{"state":"succeeded","resourceId":"ord_1","status":"declined"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		// A status without a resource proves nothing, as before.
		{`{"status":"declined"}`, 200, idem.Outcome{}, false},
		// A positive integer "id" is a resource's (Mercado Pago's payments),
		// read digit for digit, never through a float.
		{`{"id":1234567890,"status":"approved"}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "1234567890"}, true},
		{`{"id":1234567890,"status":"rejected"}`, 201, idem.Outcome{State: idem.StateFailed, ResourceID: "1234567890", Reason: "rejected"}, true},
		{`{"id":1234567890}`, 202, idem.Outcome{State: idem.StateProcessing, ResourceID: "1234567890"}, true},
		{`{"id":123456789012345678901234567890}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "123456789012345678901234567890"}, true},
		{`{"ID":9007199254740993,"payer":{"id":5}}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "9007199254740993"}, true},
		// No other number names a resource: 0 is "none" to many APIs.
		{`{"id":0,"status":"approved"}`, 201, idem.Outcome{}, false},
		{`{"id":-12,"status":"approved"}`, 201, idem.Outcome{}, false},
		{`{"id":1.5,"status":"approved"}`, 201, idem.Outcome{}, false},
		{`{"id":1e9,"status":"approved"}`, 201, idem.Outcome{}, false},
		{`{"id":10.0,"status":"approved"}`, 201, idem.Outcome{}, false},
		{`{"id":"ord_1","id":5}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "5"}, true},
		{`{"id":5,"Id":null}`, 201, idem.Outcome{}, false},
		// The guards hold for a number as for a string.
		{`{"id":12,"error":{"message":"insufficient funds"}}`, 200, idem.Outcome{}, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"status":"approved"}}`, 200, idem.Outcome{}, false},
		{`{"id":12,"idempotency_key":"another-key"}`, 201, idem.Outcome{}, false},
	})
}

// decodeRow is an answer for operation key "k1" and what DecodeJSON must
// read from it.
type decodeRow struct {
	body   string
	code   int
	want   idem.Outcome
	proves bool // false: DecodeJSON must return an error
}

func requireDecodes(t *testing.T, rows []decodeRow) {
	t.Helper()
	for _, tt := range rows {
		got, err := idem.DecodeJSON(&idem.Answer{Key: "k1", StatusCode: tt.code, Body: []byte(tt.body)})
		if !tt.proves {
			require.Errorf(t, err, "DecodeJSON(%d %s) = %+v", tt.code, tt.body, got)
			continue
		}
		require.NoErrorf(t, err, "DecodeJSON(%d %s)", tt.code, tt.body)
		require.Equalf(t, tt.want, got, "DecodeJSON(%d %s)", tt.code, tt.body)
	}
}

// Payment APIs answer a declined card with a 201 and the payment they
// created, declined: the answer shapes below are Checkout.com's, Mercado
// Pago's and PayPal's (a capture). The call is failed, once, and a retry
// of the intent replays the failure from the journal without a request.
func TestDeclinedPaymentSettlesFailed(t *testing.T) {
	for name, body := range map[string]string{
		"checkout.com": `{"id":"pay_mbabizu24mvu3mela5njyhpit4","action_id":"act_1","amount":6540,"currency":"USD",` +
			`"approved":false,"status":"Declined","response_code":"20005","response_summary":"Declined - Do Not Honour",` +
			`"source":{"type":"card","last4":"4242"},"processed_on":"2026-12-02T09:00:00Z"}`,
		"mercado pago": `{"id":1234567890,"status":"rejected","status_detail":"cc_rejected_insufficient_amount","transaction_amount":100}`,
		"paypal capture": `{"id":"2GG279541U471931P","status":"DECLINED","amount":{"currency_code":"USD","value":"10.00"},` +
			`"links":[{"rel":"self","href":"https://api.example/v2/payments/captures/2GG279541U471931P"}]}`,
		// https://developer.paypal.com/api/orders/v2/definitions/order_status:
		// a COMPLETED order "can indicate ... a payment was declined":
		// its captures say which.
		"paypal order capture": `{"id":"5O190127TN364715T","intent":"CAPTURE","status":"COMPLETED",` +
			`"purchase_units":[{"reference_id":"default","payments":{"captures":[{"id":"3C679366HH908993F","status":"DECLINED",` +
			`"amount":{"currency_code":"USD","value":"100.00"},"final_capture":true}]}}],` +
			`"links":[{"href":"https://api-m.paypal.com/v2/checkout/orders/5O190127TN364715T","rel":"self","method":"GET"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusCreated, body: body})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			posts := v.posts
			req := idem.Request{Key: "pay-k1", URL: v.srv.URL + "/payments", Body: []byte(`{"amount":6540}`)}

			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State, "a declined payment was taken for %s", res.State)
			require.NotEmpty(t, res.ResourceID, "the declined payment's id is kept")
			require.Equal(t, 1, posts(), "requests")

			op, gerr := c.Lookup(t.Context(), "", req.Key)
			require.NoError(t, gerr)
			require.Equal(t, idem.StateFailed, op.State, "journaled state")

			again, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, again.State)
			require.Equal(t, 1, posts(), "a failed payment is never sent again")
		})
	}
}

// Mercado Pago's payments have numeric ids; its documented answer to a
// payment made with an X-Idempotency-Key settles it, with the id.
// https://www.mercadopago.com.br/developers/en/docs/wallet-connect/payment-flow/idempotency/responses
func TestNumericResourceID(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusOK, body: `{"id":10458724,"status":"approved",` +
		`"wallet_payment":{"transaction_amount":700.50,"description":"Payment Google","external_reference":"Pago_123"},` +
		`"payments":[{"id":3870106238,"status":"approved","status_detail":"accredited","payment_type_id":"credit_card",` +
		`"transaction_amount":700.50,"installments":1,"capture":true}],"disbursements":[{"collector_id":"ID_COLLECTOR"}],` +
		`"payer":{"id":786547},"site_id":"MLM","binary_mode":true,"date_created":"2018-10-20T09:34:20.518-04:00"}`})
	res, err := v.submit(t, idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "10458724", res.ResourceID)
	v.requireKeys(t, "X-Idempotency-Key", "k", 1)
}
