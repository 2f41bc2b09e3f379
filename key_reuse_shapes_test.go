package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// How payment servers say "this key was used with other parameters", in
// their documented shapes, answered to a client with the default settings.

// The documented answers to a key first used by another request with
// other parameters. One that says this request differs: nothing of ours
// executed, failed, and the caller must learn that its key is at fault
// (ErrKeyConflict), not that the payment was declined. One that says
// only that the key was used (PayPal's issue code alone, its v1
// DUPLICATE_REQUEST_ID, Increase's type) may be a server that never
// replays answering a copy of ours that went first (a mesh's retry):
// flagged ReviewKeyInUse with ErrKeyConflict, never ErrFailed. Either
// way sent once. A 400 about the key that is not its reuse (missing,
// malformed) and an ordinary 400 stay plain failures.
func TestKeyReusedWithOtherParameters(t *testing.T) {
	paypal := []idem.Option{idem.WithKeyHeader("PayPal-Request-Id", idem.KeyBare)}
	for _, tt := range []struct {
		name string
		shape
		want refusal
		opts []idem.Option // the key's header where the API names its own
	}{
		{"stripe 400 idempotency_error", shape{status: 400, body: `{"error":{"type":"idempotency_error",` +
			`"message":"Keys for idempotent requests can only be used with the same parameters they were first used with. ` +
			`Try using a key other than 'k' if you meant to execute a different request."}}`}, keyConflictFailure, nil},
		{"square 400 IDEMPOTENCY_KEY_REUSED", shape{status: 400, body: `{"errors":[{"category":"INVALID_REQUEST_ERROR",` +
			`"code":"IDEMPOTENCY_KEY_REUSED","detail":"The idempotency key can only be retried with the same request data."}]}`}, keyConflictFailure, nil},
		{"whop 400 idempotency_key_mismatch", shape{status: 400, body: `{"error":{"code":"idempotency_key_mismatch",` +
			`"message":"Idempotency-Key was used with a different request"}}`}, keyConflictFailure, nil},
		{"ietf draft 422", shape{status: 422, body: `{"type":"https://developer.example.com/idempotency/docs",` +
			`"title":"Idempotency-Key is already used","detail":"Idempotency Key MUST not be reused across different payloads of this operation."}`}, keyConflictFailure, nil},
		{"ietf draft missing key", shape{status: 400, body: `{"type":"https://developer.example.com/idempotency/docs",` +
			`"title":"Idempotency-Key is missing","detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}`}, plainFailure, nil},
		{"malformed key", shape{status: 400, body: `{"error":"Idempotency-Key must be at most 255 characters"}`}, plainFailure, nil},
		{"stripe parameter_missing", shape{status: 400, body: `{"error":{"type":"invalid_request_error","code":"parameter_missing","message":"Missing required param: currency."}}`}, plainFailure, nil},
		// https://developer.paypal.com/api/payment-tokens/v3/errors/paypal_request_id_previously_used
		{"paypal 422 PAYPAL_REQUEST_ID_PREVIOUSLY_USED", shape{status: 422, body: `{"name":"UNPROCESSABLE_ENTITY",` +
			`"details":[{"issue":"PAYPAL_REQUEST_ID_PREVIOUSLY_USED","description":"The PayPal-Request-Id has already been used for another request."}],` +
			`"message":"The requested action could not be performed, semantically incorrect, or failed business validation.","debug_id":"f1c2d3e4a5b6c",` +
			`"links":[{"href":"https://developer.paypal.com/docs/api/orders/v2/#error-PAYPAL_REQUEST_ID_PREVIOUSLY_USED","rel":"information_link","method":"GET"}]}`},
			keyConflictFailure, paypal},
		{"paypal 422 issue code alone", shape{status: 422, body: `{"name":"UNPROCESSABLE_ENTITY",` +
			`"details":[{"issue":"PAYPAL_REQUEST_ID_PREVIOUSLY_USED"}],"debug_id":"f1c2d3e4a5b6c"}`}, keyUsedReview, paypal},
		// https://developer.paypal.com/api/deprecated/payments/v1/errors/duplicate_request_id
		{"paypal v1 400 DUPLICATE_REQUEST_ID", shape{status: 400, body: `{"name":"DUPLICATE_REQUEST_ID",` +
			`"message":"The value of PayPal-Request-Id header has already been used","information_link":"https://developer.paypal.com/docs/api/payments/#errors",` +
			`"debug_id":"95864e144146b"}`}, keyUsedReview, paypal},
		{"paypal 422 INSTRUMENT_DECLINED", shape{status: 422, body: `{"name":"UNPROCESSABLE_ENTITY",` +
			`"details":[{"issue":"INSTRUMENT_DECLINED","description":"The instrument presented was either declined by the processor or bank, or it can't be used for this payment."}],` +
			`"message":"The requested action could not be performed, semantically incorrect, or failed business validation.","debug_id":"a1b2c3d4e5f60"}`},
			plainFailure, paypal},
		// https://cd.support.payfacto.com/portal/en/kb/articles/idempotency-support
		{"payfacto 409 IDEMPOTENCY_KEY_REUSED", shape{status: 409, body: `{"error":{"code":"IDEMPOTENCY_KEY_REUSED","type":"IDEMPOTENCY_ERROR",` +
			`"details":["Idempotency-Key exists and the request does not match"],"message":"Idempotency Key Reused"}}`}, keyConflictFailure, nil},
		// https://increase.com/documentation/idempotency-keys
		{"increase 409 idempotency_key_already_used_error", shape{status: 409, body: `{"status":409,` +
			`"type":"idempotency_key_already_used_error","resource_id":"ach_transfer_uoxatyh3lt5evrsdvo7q"}`}, keyUsedReview, nil},
		// https://dev.gravitypayments.com/docs/emergepay/common-error-codes/idempotency-error-codes/
		// gives the message alone; the JSON around it is ours.
		{"emergepay 409 conflicting payload", shape{status: 409, body: `{"message":` +
			`"A transaction with the supplied idempotency-key already exists with a conflicting payload"}`}, keyConflictFailure, nil},
		{"409 key used with a different payload", shape{status: 409, body: `{"error":{"code":"idempotency_conflict",` +
			`"message":"Idempotency-Key was previously used with a different request body"}}`}, keyConflictFailure, nil},
		{"paypal 400 malformed request id", shape{status: 400, body: `{"name":"INVALID_REQUEST",` +
			`"details":[{"field":"PayPal-Request-Id","issue":"INVALID_PARAMETER_SYNTAX","description":"The value of a field does not conform to the expected format."}],` +
			`"debug_id":"a1b2c3d4e5f61"}`}, plainFailure, paypal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			header := "Idempotency-Key"
			if tt.opts != nil {
				header = "PayPal-Request-Id"
			}
			v := newVendor(t, tt.shape)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), tt.opts...)
			req := idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)}
			res, err := c.Submit(t.Context(), req)
			requireRefusal(t, res, err, tt.want)
			v.requireKeys(t, header, "k", 1)

			// The intent submitted again (a caller's retry, a restart)
			// gets the journaled outcome, and the same error: told a plain
			// failure, a caller may pay again under a new key while the
			// key's other request may have paid.
			res, err = c.Submit(t.Context(), req)
			requireRefusal(t, res, err, tt.want)
			v.requireKeys(t, header, "k", 1)
		})
	}
}

// Answers that idem cannot settle from at the default settings, read
// safely: never a failure for what may have executed, never a new key.
// Stripe answers a key still in flight with 409 idempotency_key_in_use,
// and a key used with other parameters with 400 even when ours may have
// executed first; PayFacto the latter with 409, counted as the 400 is.
func TestKeyShapesAfterALostResponse(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	for _, tt := range []struct {
		name   string
		shapes []shape
		state  idem.State
		review string
		posts  int
	}{
		{"stripe 409 idempotency_key_in_use, nothing of ours executed", []shape{{status: 409, body: `{"error":{"code":"idempotency_key_in_use",` +
			`"type":"invalid_request_error","message":"There is currently another in-progress request using this Stripe API key and idempotency key."}}`}},
			idem.StatePending, "", 5},
		{"payfacto 409 IDEMPOTENCY_KEY_REUSED after ours may have executed", []shape{lost, {status: 409, body: `{"error":{"code":"IDEMPOTENCY_KEY_REUSED",` +
			`"type":"IDEMPOTENCY_ERROR","details":["Idempotency-Key exists and the request does not match"],"message":"Idempotency Key Reused"}}`}},
			idem.StateUnknown, idem.ReviewRefusedAfterSend, 4},
		// https://docs.whop.com/developer/api/idempotency
		{"whop 409 idempotency_request_in_progress", []shape{{status: 409, body: `{"error":{"code":"idempotency_request_in_progress",` +
			`"message":"A request with this Idempotency-Key is already in progress"}}`}}, idem.StatePending, "", 5},
		// https://cintra-iapi.redoc.ly/tag/idempotency
		{"cintra 409 processing", []shape{{status: 409, body: `{"errors":[{"status":"409","title":"Conflict",` +
			`"detail":"The original request is still being processed. Retry after the specified interval.",` +
			`"meta":{"conflictReason":"processing","retryAfterSeconds":30}}]}`}}, idem.StatePending, "", 5},
		// https://www.mercadopago.com.ar/developers/en/docs/wallet-connect/payment-flow/idempotency/responses
		{"mercado pago 409 not completed yet", []shape{{status: 409, body: `{"status":"409","error":"Conflict",` +
			`"message":"The process has not been completed yet. Try again later.","cause":[{"code":"401001"}]}`}}, idem.StatePending, "", 5},
		// https://dev.gravitypayments.com/docs/emergepay/common-error-codes/idempotency-error-codes/
		{"emergepay 409 already in progress", []shape{{status: 409, body: `{"message":` +
			`"A transaction with the supplied idempotency-key is already in progress"}`}}, idem.StatePending, "", 5},
		{"409 key already in use", []shape{{status: 409, body: `{"error":"Idempotency key already in use: the same request is being processed"}`}},
			idem.StatePending, "", 5},
		{"stripe 400 idempotency_error after ours may have executed", []shape{lost, {status: 400, body: `{"error":{"type":"idempotency_error",` +
			`"message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`}},
			idem.StateUnknown, idem.ReviewRefusedAfterSend, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			res, err := v.submit(t)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.NotErrorIs(t, err, idem.ErrKeyConflict)
			require.Equal(t, tt.state, res.State)
			require.Equal(t, tt.review, res.Review)
			require.Equal(t, tt.posts, v.posts(), "submits")
		})
	}
}

// gocardlessCreated is GoCardless's answer to a create whose idempotency
// key already created a resource: a 409 naming it, never a replay of the
// 201 (https://gocardless.com/blog/idempotency-keys/; its client
// libraries fetch links.conflicting_resource_id and return it).
var gocardlessCreated = shape{status: http.StatusConflict, body: `{"error":{"type":"invalid_state","code":409,` +
	`"message":"A resource has already been created with this idempotency key",` +
	`"documentation_url":"https://developer.gocardless.com/api-reference#idempotent_creation_conflict","request_id":"req_1",` +
	`"errors":[{"reason":"idempotent_creation_conflict","message":"A resource has already been created with this idempotency key",` +
	`"links":{"conflicting_resource_id":"PM123"}}]}}`}

// The 409 is the server's final word for the key, judged as a replayed
// success is: ours once an attempt of ours may have reached the server,
// another request's otherwise, and never resent either way.
func TestGoCardlessCreationConflict(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	inFlight := shape{status: http.StatusConflict, body: `{"error":{"type":"invalid_state","code":409,` +
		`"errors":[{"reason":"idempotency_key_in_use","message":"A request with this idempotency key is already in progress"}]}}`}
	t.Run("after a lost response: the resource created is ours", func(t *testing.T) {
		v := newVendor(t, lost, gocardlessCreated)
		c := clientFor(t, v.srv, idemtest.NewClock(epoch))
		req := idem.Request{Key: "k", URL: v.srv.URL + "/payments", Body: []byte(`{"payments":{"amount":100}}`)}
		res, err := c.Submit(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "PM123", res.ResourceID)
		require.True(t, res.Replayed, "the server's stored answer, not a fresh execution")
		v.requireKeys(t, "Idempotency-Key", "k", 2)

		again, err := c.Submit(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, "PM123", again.ResourceID)
		v.requireKeys(t, "Idempotency-Key", "k", 2)
	})
	t.Run("nothing of ours executed: another request's key", func(t *testing.T) {
		v := newVendor(t, gocardlessCreated)
		c := clientFor(t, v.srv, idemtest.NewClock(epoch))
		req := idem.Request{Key: "k", URL: v.srv.URL + "/payments", Body: []byte(`{"payments":{"amount":100}}`)}
		res, err := c.Submit(t.Context(), req)
		requireForeignKey(t, res, err)
		v.requireKeys(t, "Idempotency-Key", "k", 1)
		requireDoSendsNothing(t, c, v, idem.ErrKeyConflict, "Idempotency-Key", 1)
	})
	t.Run("the key was in flight elsewhere before ours: not ours", func(t *testing.T) {
		v := newVendor(t, inFlight, lost, gocardlessCreated)
		res, err := v.submit(t)
		requireForeignKey(t, res, err)
		v.requireKeys(t, "Idempotency-Key", "k", 3)
	})
	t.Run("a 409 that names no resource: still in flight", func(t *testing.T) {
		v := newVendor(t, lost, shape{status: http.StatusConflict, body: `{"error":{"type":"invalid_state","code":409,` +
			`"errors":[{"reason":"idempotent_creation_conflict","message":"A resource has already been created with this idempotency key"}]}}`})
		res, err := v.submit(t)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NotErrorIs(t, err, idem.ErrKeyConflict)
		require.Equal(t, idem.StateProcessing, res.State)
		v.requireKeys(t, "Idempotency-Key", "k", 5)
	})
}
