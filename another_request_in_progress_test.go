package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Providers that say "another request with the same key is in progress"
// answer it with 409, in words that also name another request and the key
// ("another", "same idempotency key"), the words a key reused by a
// request that differs is refused in too. Read as "differs", the payment
// still running under our key would be failed with ErrKeyConflict, and a
// caller retrying under a new key would pay twice. Each row's in-progress
// answer is the provider's documented one; the refusal of a body that
// differs, where the provider documents one, stays a conflict.
var anotherRequestInProgress = []struct {
	name    string
	header  string // the provider's key header
	key     string
	running shape  // the key's request is still running
	differs *shape // the key was used with another body, nil if not documented
}{
	{
		// https://docs.stripe.com/api/idempotent_requests: a request that
		// "conflicts with another that's executing concurrently" saves no
		// result; Stripe answers it 409 idempotency_error in these words
		// (stripe-node raises it as StripeIdempotencyError, statusCode 409).
		name: "stripe", header: "Idempotency-Key", key: "k",
		running: shape{status: http.StatusConflict, body: `{"error":{"message":"There is currently another in-progress request using this ` +
			`Idempotent Key (that probably means you submitted twice, and the other request is still going through): req_9xQ2JrP0aT. ` +
			`Please try again later.","type":"idempotency_error"}}`},
	},
	{
		// https://razorpay.com/docs/api/refunds/normal-refunds-idempotent:
		// "If a request is received while a prior request is still being
		// processed, the system will return a 409 Conflict status code. You
		// may retry the request"; "a different payload will be rejected as
		// a BAD_REQUEST", whose body the page shows. Keys are at least 10
		// characters, in X-Refund-Idempotency.
		name: "razorpay refund", header: "X-Refund-Idempotency", key: "rfnd-2026-0001",
		running: shape{status: http.StatusConflict, body: `{"error":{"code":"BAD_REQUEST_ERROR","description":"Another request with the same ` +
			`idempotency key is still in progress.","source":"NA","step":"NA","reason":"NA","metadata":{}}}`},
		differs: &shape{status: http.StatusBadRequest, body: `{"error":{"code":"BAD_REQUEST_ERROR","description":"Different request with the ` +
			`same idempotency key has already been processed.","source":"NA","step":"NA","reason":"NA","metadata":{}}}`},
	},
	{
		// https://developers.bluesnap.com/v8976-JSON/docs/idempotency-errors:
		// 60102 REQUEST_WITH_SAME_IDEMPOTENCY_KEY_ALREADY_IN_PROGRESS is a
		// 409, "a request is retried using the same idempotency-key as the
		// original request while it is still being processed"; 60101
		// SAME_IDEMPOTENCY_KEY_WAS_ALREADY_IN_USE_WITH_PREVIOUS_DIFFERENT_REQUEST
		// a 422. BlueSnap's JSON errors are {"message":[{"errorName","code",
		// "description"}]}.
		name: "bluesnap", header: "Idempotency-Key", key: "k",
		running: shape{status: http.StatusConflict, body: `{"message":[{"errorName":"REQUEST_WITH_SAME_IDEMPOTENCY_KEY_ALREADY_IN_PROGRESS",` +
			`"code":"60102","description":"Request with same idempotency key is already in progress."}]}`},
		differs: &shape{status: http.StatusUnprocessableEntity, body: `{"message":[{"errorName":` +
			`"SAME_IDEMPOTENCY_KEY_WAS_ALREADY_IN_USE_WITH_PREVIOUS_DIFFERENT_REQUEST","code":"60101",` +
			`"description":"Same idempotency key was already in use with previous different request."}]}`},
	},
	{
		// https://developers.sinch.com/docs/errors/registry/idempotency-conflict:
		// "A request with the same Idempotency-Key is still being processed,
		// so this request was not processed again", a problem document
		// whose detail names the key.
		name: "sinch", header: "Idempotency-Key", key: "3fa85f64-5717-4562-b3fc-2c963f66afa6",
		running: shape{status: http.StatusConflict, header: http.Header{"Content-Type": {"application/problem+json"}},
			body: `{"type":"https://developers.sinch.com/docs/errors/registry/idempotency-conflict","title":"Idempotency Conflict",` +
				`"detail":"A request with Idempotency-Key 3fa85f64-5717-4562-b3fc-2c963f66afa6 is still being processed. Retry later with the same key."}`},
	},
}

// TestAnotherRequestInProgressIsInFlight: the first attempt executes and
// its answer is lost to a gateway's 502; three resends are answered that
// the key's request is still in progress; the fourth gets the stored
// answer, replayed. Ours, waited for: succeeded with the one order the
// first attempt made, five sends of the same key and bytes, never failed,
// never flagged (three in-progress answers counted as refusals would flag
// it before the fourth resend).
func TestAnotherRequestInProgressIsInFlight(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>502 Bad Gateway</html>`}
	for _, p := range anotherRequestInProgress {
		t.Run(p.name, func(t *testing.T) {
			stored := shape{status: http.StatusOK, header: http.Header{"Idempotent-Replayed": {"true"}}, body: `{"id":"ord_1","status":"succeeded"}`}
			v := newVendor(t, lost, p.running, p.running, p.running, stored)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader(p.header, idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: p.key, URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "ord_1", res.ResourceID)
			require.Empty(t, res.Review)
			v.requireKeys(t, p.header, p.key, 5)
			v.requireBodies(t, `{"amount":100}`, 5)

			op, err := c.Lookup(t.Context(), idem.DefaultScope, p.key)
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State, "journaled state")
		})
	}
}

// TestAnotherRequestInProgressToAFirstAttempt: answered to a first
// attempt, the key's request is not this one (nothing of ours could have
// run): not failed, which would tell the caller no payment was made while
// one runs under the key, but waited for and resent, once it ends, with
// the same key and bytes. The server then executes the resend (the other
// request, a copy of ours, having failed before saving a result, as
// Stripe saves none for a request that fails validation): one order.
func TestAnotherRequestInProgressToAFirstAttempt(t *testing.T) {
	for _, p := range anotherRequestInProgress {
		t.Run(p.name, func(t *testing.T) {
			made := shape{status: http.StatusCreated, body: `{"id":"ord_1","status":"succeeded"}`}
			v := newVendor(t, p.running, made)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader(p.header, idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: p.key, URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "ord_1", res.ResourceID)
			v.requireKeys(t, p.header, p.key, 2)
			v.requireBodies(t, `{"amount":100}`, 2)
		})
	}
}

// TestKeyUsedByADifferentRequestStaysAConflict: the same providers'
// refusal of a key used before with another body is final: failed with
// ErrKeyConflict at the first answer, never resent.
func TestKeyUsedByADifferentRequestStaysAConflict(t *testing.T) {
	for _, p := range anotherRequestInProgress {
		if p.differs == nil {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			v := newVendor(t, *p.differs, shape{status: http.StatusCreated, body: `{"id":"ord_2","status":"succeeded"}`})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader(p.header, idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: p.key, URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
			require.ErrorIs(t, err, idem.ErrKeyConflict)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State)
			v.requireKeys(t, p.header, p.key, 1)

			op, err := c.Lookup(t.Context(), idem.DefaultScope, p.key)
			require.NoError(t, err)
			require.Equal(t, idem.StateFailed, op.State, "journaled state")
		})
	}
}
