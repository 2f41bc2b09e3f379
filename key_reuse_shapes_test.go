package idem_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// How payment servers say "this key was used with other parameters", in
// their documented shapes, answered to a client with the default settings.

// The documented answers to a key first used by another request with
// other parameters. Nothing of ours executed: failed, and the caller
// must learn that its key is at fault (ErrKeyConflict), not that the
// payment was declined. A 400 about the key that is not its reuse
// (missing, malformed) and an ordinary 400 stay plain failures.
func TestKeyReusedWithOtherParameters(t *testing.T) {
	for _, tt := range []struct {
		name string
		shape
		conflict bool
	}{
		{"stripe 400 idempotency_error", shape{status: 400, body: `{"error":{"type":"idempotency_error",` +
			`"message":"Keys for idempotent requests can only be used with the same parameters they were first used with. ` +
			`Try using a key other than 'k' if you meant to execute a different request."}}`}, true},
		{"square 400 IDEMPOTENCY_KEY_REUSED", shape{status: 400, body: `{"errors":[{"category":"INVALID_REQUEST_ERROR",` +
			`"code":"IDEMPOTENCY_KEY_REUSED","detail":"The idempotency key can only be retried with the same request data."}]}`}, true},
		{"whop 400 idempotency_key_mismatch", shape{status: 400, body: `{"error":{"code":"idempotency_key_mismatch",` +
			`"message":"Idempotency-Key was used with a different request"}}`}, true},
		{"ietf draft 422", shape{status: 422, body: `{"type":"https://developer.example.com/idempotency/docs",` +
			`"title":"Idempotency-Key is already used","detail":"Idempotency Key MUST not be reused across different payloads of this operation."}`}, true},
		{"ietf draft missing key", shape{status: 400, body: `{"type":"https://developer.example.com/idempotency/docs",` +
			`"title":"Idempotency-Key is missing","detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}`}, false},
		{"malformed key", shape{status: 400, body: `{"error":"Idempotency-Key must be at most 255 characters"}`}, false},
		{"stripe parameter_missing", shape{status: 400, body: `{"error":{"type":"invalid_request_error","code":"parameter_missing","message":"Missing required param: currency."}}`}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shape)
			res, err := v.submit(t)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, tt.conflict, errors.Is(err, idem.ErrKeyConflict), "ErrKeyConflict in %v", err)
			require.Equal(t, idem.StateFailed, res.State)
			require.Equal(t, 1, v.posts(), "submits")
		})
	}
}

// Answers that idem cannot settle from at the default settings, read
// safely: never a failure for what may have executed, never a new key.
// GoCardless answers a create resent after it succeeded with 409
// idempotent_creation_conflict naming the resource; Stripe answers a key
// still in flight with 409 idempotency_key_in_use, and a key used with
// other parameters with 400 even when ours may have executed first.
func TestKeyShapesAfterALostResponse(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	for _, tt := range []struct {
		name   string
		shapes []shape
		state  idem.State
		review string
		posts  int
	}{
		{"gocardless 409 idempotent_creation_conflict", []shape{lost, {status: 409, body: `{"error":{"type":"invalid_state","code":409,` +
			`"errors":[{"reason":"idempotent_creation_conflict","message":"A resource has already been created with this idempotency key",` +
			`"links":{"conflicting_resource_id":"PM123"}}]}}`}}, idem.StateProcessing, "", 5},
		{"stripe 409 idempotency_key_in_use, nothing of ours executed", []shape{{status: 409, body: `{"error":{"code":"idempotency_key_in_use",` +
			`"type":"invalid_request_error","message":"There is currently another in-progress request using this Stripe API key and idempotency key."}}`}},
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
