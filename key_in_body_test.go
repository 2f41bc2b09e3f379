package idem_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestKeyInBodyMustBeInTheBody: with WithKeyInBody idem sends no key
// header, so a body without the key reaches the server with no key at
// all, and every retry may execute again: a charge per attempt. Prepare
// refuses such a body; the key written as JSON or form encoding writes it
// is found.
func TestKeyInBodyMustBeInTheBody(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithKeyInBody()))
	_, err := e.client.Prepare(e.ctx, idem.Request{Key: "draft-7", URL: e.srv.URL + "/orders", Body: []byte(`{"amount":5}`)})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "WithKeyInBody")
	ops, err := e.client.List(e.ctx, idem.Filter{})
	require.NoError(t, err)
	require.Empty(t, ops, "List() after a refused request")

	const odd = `a<b>&c/"d`
	jsonBody, err := json.Marshal(map[string]any{"idempotency_key": odd, "amount": 5}) // escapes <, >, & and "
	require.NoError(t, err)
	for name, r := range map[string]idem.Request{
		"plain":        {Key: "draft-8", Body: []byte(`{"idempotency_key":"draft-8","amount":5}`)},
		"JSON-escaped": {Key: odd, Body: jsonBody},
		"form":         {Key: odd + "2", Body: []byte("amount=5&idempotency_key=" + url.QueryEscape(odd+"2")), Header: map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}},
	} {
		t.Run(name, func(t *testing.T) {
			r.URL = e.srv.URL + "/orders"
			_, err := e.client.Prepare(e.ctx, r)
			require.NoError(t, err)
		})
	}
}

// Airwallex takes its idempotency key in the body (request_id) and
// refuses a request_id used before with a 400 that names the key by that
// field, not as an "idempotency" key: duplicate_request, "The same
// request ID has already been used. Please try again with a different
// request ID." (https://www.airwallex.com/docs/payments__error-codes),
// and request_id_duplicate, "The request_id provided in the request has
// already been used." (https://www.airwallex.com/docs/global-treasury__error-codes).
// Airwallex never replays: a request_id used before is refused, the
// same request's too. To a first attempt, then, the request that used it
// may be a copy of ours (a mesh's retry of a 503, net/http's resend on a
// dead connection): not failed, but flagged ReviewKeyInUse with
// ErrKeyConflict, sent once. After ours may have executed it
// is no failure at all: ours may be the request that used it.
func TestBodyKeyReuseNamedByItsField(t *testing.T) {
	const key = "5f8a2c1e-9b3d-4e7f-8a6b-1c2d3e4f5a6b"
	body := `{"request_id":"` + key + `","amount":100,"currency":"USD","merchant_order_id":"order-1"}`
	for _, tt := range []struct {
		name  string
		shape shape
		want  refusal
	}{
		{"airwallex duplicate_request", shape{status: 400, body: `{"code":"duplicate_request",` +
			`"message":"The same request ID has already been used. Please try again with a different request ID."}`}, keyUsedReview},
		{"airwallex request_id_duplicate", shape{status: 400, body: `{"code":"request_id_duplicate",` +
			`"message":"The request_id provided in the request has already been used."}`}, keyUsedReview},
		{"airwallex validation_error", shape{status: 400, body: `{"code":"validation_error","source":"merchant_order_id",` +
			`"message":"merchant_order_id must be provided"}`}, plainFailure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requireRefusedOnce(t, tt.shape, key, "/api/v1/pa/payment_intents/create", body, tt.want)
		})
	}
	t.Run("airwallex duplicate_request after a lost response", func(t *testing.T) {
		v := newVendor(t, shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}, shape{status: 400,
			body: `{"code":"duplicate_request","message":"The same request ID has already been used. Please try again with a different request ID."}`})
		c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
		res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: v.srv.URL + "/api/v1/pa/payment_intents/create", Body: []byte(body)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NotErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, idem.StateUnknown, res.State)
		require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
		v.requireBodies(t, body, 4)
	})
}

// AWS takes its idempotency token in the body and refuses one reused with
// other parameters with 400 IdempotentParameterMismatch, in EC2's Query
// protocol (a form body, an XML error:
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)
// and in DynamoDB's JSON one (IdempotentParameterMismatchException,
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
// Nothing of ours executed: failed as a key conflict, sent once.
func TestBodyKeyParameterMismatch(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		shape      shape
	}{
		{"ec2 IdempotentParameterMismatch", "Action=RunInstances&ClientToken=k&ImageId=ami-0abcdef1234567890&MaxCount=1&MinCount=1",
			shape{status: 400, body: `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>IdempotentParameterMismatch</Code>` +
				`<Message>The request uses the same client token as a previous, but non-identical request. Do not reuse a client token with ` +
				`different requests, unless the requests are identical.</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>`}},
		{"dynamodb IdempotentParameterMismatchException", `{"ClientRequestToken":"k","TransactItems":[]}`,
			shape{status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",` +
				`"message":"DynamoDB rejected the request because you retried a request with a different payload but with an idempotent token that was already used."}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shape)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/", Body: []byte(tt.body)})
			require.ErrorIs(t, err, idem.ErrFailed)
			require.ErrorIs(t, err, idem.ErrKeyConflict)
			require.Equal(t, idem.StateFailed, res.State)
			v.requireBodies(t, tt.body, 1)
		})
	}
}

// A JSON:API server takes a client-generated id as the resource's "id"
// member (JSON:API 1.1, "Client-Generated IDs": the key in the body) and
// answers a validation failure with 422 and error objects that carry
// their own "id" member and a JSON Pointer to the offending member
// (JSON:API 1.1, "Error Objects"; its example's 422). Neither speaks of
// the key: the error object's "id" is the occurrence's, the pointer's
// ".../customer/data/id" another resource's. A plain refusal: failed,
// not a key conflict, sent once. A Rails server's uniqueness error on
// the member ({"id": ["has already been taken"]}, ActiveRecord's
// errors.messages.taken) does speak of the key, and says only that a
// request made the resource: a copy of this one (a mesh's retry) gets it
// too, so it is flagged ReviewKeyInUse, never failed.
func TestBodyKeyGenericFieldNameInErrors(t *testing.T) {
	const key = "5f8a2c1e-9b3d-4e7f-8a6b-1c2d3e4f5a6b"
	body := `{"data":{"type":"payments","id":"` + key + `","attributes":{"amount":100,"currency":"EUR"},` +
		`"relationships":{"customer":{"data":{"type":"customers","id":"cus-1"}}}}}`
	for _, tt := range []struct {
		name, answer string
		want         refusal
	}{
		{"error object id", `{"errors":[{"id":"a1b2c3","status":"422","title":"Invalid Attribute",` +
			`"detail":"Amount must be at least 500.","source":{"pointer":"/data/attributes/amount"}}]}`, plainFailure},
		{"pointer to another resource's id", `{"errors":[{"status":"422","title":"Invalid Relationship",` +
			`"detail":"Customer cus-1 does not exist.","source":{"pointer":"/data/relationships/customer/data/id"}}]}`, plainFailure},
		{"rails uniqueness of the id", `{"errors":{"id":["has already been taken"]}}`, keyUsedReview},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requireRefusedOnce(t, shape{status: http.StatusUnprocessableEntity, body: tt.answer}, key, "/payments", body, tt.want)
		})
	}
}

// refusal is how a refused first attempt must end.
type refusal int

const (
	plainFailure       refusal = iota // failed, ErrFailed, no ErrKeyConflict
	keyConflictFailure                // failed, ErrFailed and ErrKeyConflict: the request differs from the key's
	keyUsedReview                     // open, flagged ReviewKeyInUse, ErrKeyConflict: the key was used
)

// requireRefusal asserts that a refused first attempt's call ended as
// want says.
func requireRefusal(t testing.TB, res *idem.Result, err error, want refusal) {
	t.Helper()
	if want == keyUsedReview {
		requireForeignKey(t, res, err)
		require.ErrorIs(t, err, idem.ErrNeedsReview)
		return
	}
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, want == keyConflictFailure, errors.Is(err, idem.ErrKeyConflict), "ErrKeyConflict in %v", err)
	require.Equal(t, idem.StateFailed, res.State)
}

// requireRefusedOnce submits body, its key in it, to a server that
// answers sh: ended as want says, and sent once, however often the
// intent is submitted again.
func requireRefusedOnce(t *testing.T, sh shape, key, path, body string, want refusal) {
	t.Helper()
	v := newVendor(t, sh)
	c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
	req := idem.Request{Key: key, URL: v.srv.URL + path, Body: []byte(body)}
	for range 2 { // the intent submitted again gets the journaled outcome
		res, err := c.Submit(t.Context(), req)
		requireRefusal(t, res, err, want)
		v.requireBodies(t, body, 1)
	}
}
