package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// adyenInProgress is Adyen's answer to a request whose Idempotency-Key
// belongs to a request it has already processed or is still processing:
// a 422 with errorCode 704, in words that name no key. It says the key's
// request ran or runs, not that this one was refused on its merits.
var adyenInProgress = shape{status: http.StatusUnprocessableEntity,
	body: `{"status":422,"errorCode":"704","message":"request already processed or in progress","errorType":"validation"}`}

// A refusal that says the key's request is still running is the 409 of
// servers that answer it with 422 or 400: never "failed", which tells
// the caller nothing was charged when the key's request may charge.
func TestInProgressRefusal(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	authorised := shape{status: http.StatusOK, body: `{"pspReference":"993617895204576J","resultCode":"Authorised"}`}

	t.Run("to a key nothing of ours used: another request's, for a person", func(t *testing.T) {
		v := newVendor(t, adyenInProgress, authorised)
		c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithDecoder(decodeAdyen))
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
		requireForeignKey(t, res, err)
		// Nor does Resume take the other request's answer for ours.
		sum, err := c.Resume(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, sum.Review)
		v.requireKeys(t, "Idempotency-Key", "k", 1)
	})

	t.Run("after ours may have executed: ours, in flight, waited for", func(t *testing.T) {
		v := newVendor(t, lost, adyenInProgress, adyenInProgress, adyenInProgress, authorised)
		res, err := v.submit(t, idem.WithDecoder(decodeAdyen))
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "993617895204576J", res.ResourceID)
		require.Empty(t, res.Review)
		v.requireKeys(t, "Idempotency-Key", "k", 5)
	})

	t.Run("a 400 that says the key's request is in progress", func(t *testing.T) {
		v := newVendor(t, shape{status: http.StatusBadRequest,
			body: `{"error":{"code":"idempotency_key_in_use","message":"A request with this idempotency key is currently being processed"}}`})
		res, err := v.submit(t)
		requireForeignKey(t, res, err)
		v.requireKeys(t, "Idempotency-Key", "k", 1)
	})

	// https://developer.paypal.com/api/rest/reference/idempotency: two
	// simultaneous requests with one PayPal-Request-Id, "PayPal processes
	// the first request and might fail the second", in the words of its
	// PREVIOUS_REQUEST_IN_PROGRESS issue.
	paypal := []idem.Option{idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare)}
	paypalInProgress := shape{status: http.StatusUnprocessableEntity, body: `{"name":"UNPROCESSABLE_ENTITY",` +
		`"details":[{"issue":"PREVIOUS_REQUEST_IN_PROGRESS","description":"A previous request on this resource is currently in progress. ` +
		`Please wait for some time and try again."}],"message":"The requested action could not be performed, semantically incorrect, ` +
		`or failed business validation.","debug_id":"90957fca61718"}`}
	t.Run("paypal, after ours may have executed", func(t *testing.T) {
		v := newVendor(t, lost, paypalInProgress, paypalInProgress, paypalInProgress,
			shape{status: http.StatusCreated, body: `{"id":"2GG279541U471931P","status":"COMPLETED"}`})
		res, err := v.submit(t, paypal...)
		require.NoError(t, err)
		require.Equal(t, "2GG279541U471931P", res.ResourceID)
		v.requireKeys(t, "PayPal-Request-Id", "k", 5)
	})
	t.Run("paypal, to a key nothing of ours used", func(t *testing.T) {
		v := newVendor(t, paypalInProgress)
		res, err := v.submit(t, paypal...)
		requireForeignKey(t, res, err)
		v.requireKeys(t, "PayPal-Request-Id", "k", 1)
	})

	t.Run("an ordinary 422 stays a failure", func(t *testing.T) {
		v := newVendor(t, shape{status: http.StatusUnprocessableEntity,
			body: `{"status":422,"errorCode":"101","message":"Invalid card number","errorType":"validation"}`})
		res, err := v.submit(t)
		require.ErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, idem.StateFailed, res.State)
		v.requireKeys(t, "Idempotency-Key", "k", 1)
	})
}

// DynamoDB's TransactWriteItems takes its idempotency key in the body
// (ClientRequestToken) and answers a call whose token's transaction is
// still running with 400 TransactionInProgressException, "The
// transaction with the given request token is already in progress",
// whose handling AWS documents as retries that "trigger completion of
// the ongoing TransactWriteItems request"
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
// Errors come as {"__type":"com.amazonaws.dynamodb.v20120810#<Code>",
// "message":…}
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html).
// It names no idempotency key in words idem knows: read as a plain 400,
// three of them after a lost answer flagged a transaction that a resend
// would have completed for a person, and the first attempt's was read
// as "failed" while a transaction under our token ran.
func TestTransactionInProgressRefusal(t *testing.T) {
	inProgress := shape{status: http.StatusBadRequest, body: `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionInProgressException",` +
		`"message":"The transaction with the given request token is already in progress."}`}
	done := shape{status: http.StatusOK, body: `{}`}
	submit := func(t *testing.T, v *vendor) (*idem.Result, error) {
		t.Helper()
		c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), decodeDynamo())
		return c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/", Body: []byte(dynamoTransaction), Header: dynamoHeader})
	}

	t.Run("after ours may have executed: ours, in flight, waited for", func(t *testing.T) {
		v := newVendor(t, shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}, inProgress, inProgress, inProgress, done)
		res, err := submit(t, v)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Empty(t, res.Review)
		v.requireBodies(t, dynamoTransaction, 5)
	})
	t.Run("to a token nothing of ours used: another request's, for a person", func(t *testing.T) {
		v := newVendor(t, inProgress, done)
		res, err := submit(t, v)
		requireForeignKey(t, res, err)
		v.requireBodies(t, dynamoTransaction, 1)
	})
}

// Refusals saying the key's request still runs, after an attempt that may
// have executed, are waits for ours and not refusals of it: one other
// refusal after them (an expired credential, which the caller's hook
// renews) is the first of the three that leave an operation for a
// person, as it would be after a 409 in flight, not the third. Counted,
// the operation was flagged at once, never resent, though the next
// resend got its result.
func TestInProgressRefusalsAreNotCountedAsRefusals(t *testing.T) {
	lost := shape{status: http.StatusGatewayTimeout, body: `<html>gateway timeout</html>`}

	t.Run("paypal", func(t *testing.T) {
		// PayPal's OAuth access tokens expire (expires_in); a call with
		// an expired one is refused 401 invalid_token, "Access Token
		// not found in cache", and its SDKs fetch a new token.
		paypalInProgress := shape{status: http.StatusUnprocessableEntity, body: `{"name":"UNPROCESSABLE_ENTITY",` +
			`"details":[{"issue":"PREVIOUS_REQUEST_IN_PROGRESS","description":"A previous request on this resource is currently in progress. ` +
			`Please wait for some time and try again."}],"debug_id":"90957fca61718"}`}
		expired := shape{status: http.StatusUnauthorized, body: `{"error":"invalid_token","error_description":"Access Token not found in cache"}`}
		v := newVendor(t, lost, paypalInProgress, paypalInProgress, expired,
			shape{status: http.StatusCreated, body: `{"id":"2GG279541U471931P","status":"COMPLETED"}`})
		res, err := v.submit(t, idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare))
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "2GG279541U471931P", res.ResourceID)
		require.Empty(t, res.Review)
		v.requireKeys(t, "PayPal-Request-Id", "k", 5)
	})

	t.Run("dynamodb", func(t *testing.T) {
		// An STS session's credentials expire: DynamoDB refuses the call
		// 400 ExpiredTokenException (docs.aws.amazon.com, DynamoDB
		// Programming.Errors), and the SDK's provider renews them.
		inProgress := shape{status: http.StatusBadRequest, body: `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionInProgressException",` +
			`"message":"The transaction with the given request token is already in progress."}`}
		expired := shape{status: http.StatusBadRequest, body: `{"__type":"com.amazon.coral.service#ExpiredTokenException",` +
			`"message":"The security token included in the request is expired"}`}
		v := newVendor(t, lost, inProgress, inProgress, expired, shape{status: http.StatusOK, body: `{}`})
		c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), decodeDynamo())
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/", Body: []byte(dynamoTransaction), Header: dynamoHeader})
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Empty(t, res.Review)
		v.requireBodies(t, dynamoTransaction, 5)
	})
}
