package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Paddle Billing answers every request with the entity in a "data"
// object and a "meta" object about the request beside it: a created
// transaction is 201 {"data":{"id":"txn_…","status":"ready",…},
// "meta":{"request_id":…}}
// (developer.paddle.com/api-reference/about/success-responses). Circle
// answers with the "data" object alone: a created payment is
// {"data":{"id":…,"type":"payment","status":"pending",…}}, "failed" when
// it was denied
// (developers.circle.com/api-reference/circle-mint/payments/create-payment,
// developers.circle.com/developer/docs/circle-api-resources: "Terminal
// states are paid and failed"). DecodeJSON found neither "state" nor
// "id" at the top, so with the default settings every created resource
// was resent under its key until the key window passed and then left
// unknown for a person. The resource under "data" is read as a plain
// one is, sent once.
func TestDataEnvelopedResource(t *testing.T) {
	for _, tt := range []struct {
		name   string
		body   string
		state  idem.State
		id     string
		reason string
	}{
		{name: "paddle transaction ready",
			body: `{"data":{"id":"txn_01hv8wptq8987qeep44cyrewp9","status":"ready","customer_id":"ctm_01hv6y1jedq4p1n0yqn5ba3ky4",` +
				`"currency_code":"USD","origin":"api","collection_mode":"automatic","items":[{"price_id":"pri_01gsz8x8sawmvhz1pv30nge1ke","quantity":1}]},` +
				`"meta":{"request_id":"aa0009cb-18f7-4538-b1cd-ad29d91cfaa7"}}`,
			state: idem.StateSucceeded, id: "txn_01hv8wptq8987qeep44cyrewp9"},
		{name: "circle payment pending",
			body: `{"data":{"id":"b8627ae8-732b-4d25-b947-1df8f4007a29","type":"payment","merchantId":"fc988ed5-c129-4f70-a064-e5beb7eb8e32",` +
				`"amount":{"amount":"3.14","currency":"USD"},"source":{"id":"b8627ae8-732b-4d25-b947-1df8f4007a29","type":"card"},"status":"pending"}}`,
			state: idem.StateSucceeded, id: "b8627ae8-732b-4d25-b947-1df8f4007a29"},
		{name: "circle payment failed",
			body: `{"data":{"id":"e665ea6e-3a53-4f93-a85e-45178d48d9ea","type":"payment","amount":{"amount":"1.0","currency":"USD"},` +
				`"status":"failed","errorCode":"payment_denied","riskEvaluation":{"decision":"denied","reason":"3000"}}}`,
			state: idem.StateFailed, id: "e665ea6e-3a53-4f93-a85e-45178d48d9ea", reason: "failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusCreated, body: tt.body})
			res, err := v.submit(t)
			requireSettledOnce(t, v, "Idempotency-Key", res, err, idem.Outcome{State: tt.state, ResourceID: tt.id, Reason: tt.reason})
		})
	}
}

// requireSettledOnce asserts that a submit of key "k" ended as want says
// (failed with ErrFailed and want's reason, or with no error), after the
// vendor answered one request, the key in header.
func requireSettledOnce(t testing.TB, v *vendor, header string, res *idem.Result, err error, want idem.Outcome) {
	t.Helper()
	require.Equal(t, want.State, res.State, "err: %v", err)
	if want.State == idem.StateFailed {
		require.ErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, want.Reason, res.Reason)
	} else {
		require.NoError(t, err)
	}
	require.Equal(t, want.ResourceID, res.ResourceID)
	v.requireKeys(t, header, "k", 1)
}

// The rule reads a resource under "data" only when nothing but "meta"
// is beside it and the resource carries its own status: every other
// shape with a "data" member is an envelope whose other members may say
// the call failed, or a document whose resource keeps its status
// elsewhere, and reading the "id" under it as made would take a refused
// or declined payment for a success. Each proves nothing, as before.
func TestDataEnvelopeShapesNotRead(t *testing.T) {
	for _, tt := range []struct {
		name, body string
	}{
		// GraphQL's partial answer: the mutation's error beside its data.
		{"errors beside data", `{"data":{"id":"p_1","status":"paid"},"errors":[{"message":"card declined"}]}`},
		// Flutterwave's and Paystack's envelopes: "status" is the call's.
		{"status beside data", `{"status":"success","message":"Charge initiated","data":{"id":288200108,"status":"failed"}}`},
		{"code beside data", `{"code":"0","msg":"","data":{"id":"o_1","status":"live"}}`},
		// JSON:API (jsonapi.org/format/#document-resource-objects): the
		// status is under "attributes", where a "failed" would go unread.
		{"json:api resource", `{"data":{"type":"orders","id":"1","attributes":{"status":"failed"}}}`},
		{"json:api document", `{"jsonapi":{"version":"1.1"},"data":{"type":"orders","id":"1","status":"paid"}}`},
		{"links beside data", `{"data":{"id":"1","status":"paid"},"links":{"self":"/orders/1"}}`},
		{"no status in data", `{"data":{"id":"ctm_01hrffh7gvp29kc7xahm8wddwa","name":"Sam Miller"},"meta":{"request_id":"r"}}`},
		{"status not a word", `{"data":{"id":"p_1","status":{"code":"paid"}}}`},
		{"list", `{"data":[{"id":"p_1","status":"paid"}],"meta":{"pagination":{"has_more":false}}}`},
		{"data in data", `{"data":{"data":{"id":"p_1","status":"paid"}}}`},
		{"graphql mutation", `{"data":{"createPayment":{"id":"p_1","status":"paid"}}}`},
		{"error status", `{"data":{"id":"p_1","status":"error"}}`},
		{"success false in data", `{"data":{"id":"p_1","status":"paid","success":false}}`},
		{"error in data", `{"data":{"id":"p_1","status":"paid","error":{"code":"card_declined"}}}`},
		{"another key in data", `{"data":{"id":"p_1","status":"paid","idempotencyKey":"k2"}}`},
		{"data null", `{"data":null,"meta":{"request_id":"r"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, query := range []bool{false, true} {
				out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: http.StatusCreated, Query: query, Body: []byte(tt.body)})
				require.Errorf(t, err, "query %v: read as %+v", query, out)
			}
		})
	}
}

// A result query's answer in the same envelope, as a read-back by key
// would give it, is read as the create's is; so is a resource "state"
// beside its "id" under "data", and the echo of our own key.
func TestDataEnvelopeQueryAnswer(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       idem.Outcome
	}{
		{"circle payment paid", `{"data":{"id":"p_1","type":"payment","status":"paid","idempotencyKey":"k"}}`,
			idem.Outcome{State: idem.StateSucceeded, ResourceID: "p_1"}},
		{"paddle transaction past due", `{"data":{"id":"txn_1","status":"past_due"},"meta":{"request_id":"r"}}`,
			idem.Outcome{State: idem.StateSucceeded, ResourceID: "txn_1"}},
		{"protocol state", `{"data":{"state":"processing","resourceId":"p_1"}}`,
			idem.Outcome{State: idem.StateProcessing, ResourceID: "p_1"}},
		{"declined", `{"data":{"id":"p_1","status":"declined"},"meta":{}}`,
			idem.Outcome{State: idem.StateFailed, ResourceID: "p_1", Reason: "declined"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: http.StatusOK, Query: true, Body: []byte(tt.body)})
			require.NoError(t, err)
			require.Equal(t, tt.want, out)
		})
	}
}
