package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Servers other than Stripe mark a replay with headers of their own. A
// replayed success to an operation nothing of which can have executed is
// another request's: taking it as ours would report an order placed that
// never was.
func TestReplayMarkerVariants(t *testing.T) {
	for _, h := range []http.Header{
		{"X-Idempotency-Replayed": {"false"}},
		{"Idempotency-Replayed": {"?0"}}, // an RFC 8941 boolean, false
		// https://developer.integrated.finance/changelog/release-notes-for-idempotency-support
		{"X-Idempotency-Status": {"processed"}},
		{"X-Idempotency-Cache-Hit": {"false"}},
	} {
		for name, val := range h {
			t.Run("fresh answer marked "+name+"="+val[0]+": settles", func(t *testing.T) {
				v := newVendor(t, shape{status: 201, header: h, body: `{"id":"ord_1"}`})
				res, err := v.submit(t)
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "ord_1", res.ResourceID)
				require.False(t, res.Replayed)
				v.requireKeys(t, "Idempotency-Key", "k", 1)
			})
		}
	}
	for _, h := range []http.Header{
		{"Idempotent-Replayed": {"true"}},
		{"Idempotency-Replayed": {"true"}},
		{"X-Idempotency-Replayed": {"true"}},
		{"X-Idempotent-Replayed": {"true"}},
		{"X-Idempotency-Replayed": {`"true"`}},
		// An RFC 8941 boolean, as a server that writes structured fields
		// sends it.
		{"Idempotency-Replayed": {"?1"}},
		{"Idempotent-Replayed": {"?1"}},
		{"X-Idempotency-Status": {"replayed"}},
		{"Idempotency-Status": {"Replayed"}},
		{"X-Gcs-Idempotence-Request-Timestamp": {"1700000000000"}},
		// PPRO marks answers "served from the idempotency store" so
		// (https://developerhub.ppro.com/global-api/reference/api-idempotency).
		{"Request-Idempotency": {"true"}},
		// easypay marks a replay "Idempotency-Replay: true"
		// (https://docs.easypay.pt/docs/idempotency).
		{"Idempotency-Replay": {"true"}},
		// Flutterwave marks an answer "retrieved from an already existing
		// idempotency key" with "X-Idempotency-Cache-Hit: true"
		// (https://developer.flutterwave.com/docs/idempotency).
		{"X-Idempotency-Cache-Hit": {"true"}},
		// Chargebee answers a key it holds with "the response for that
		// record with a response header chargebee-idempotency-replayed
		// set to true" (apidocs.chargebee.com/docs/api/idempotency), which
		// its SDKs surface as isIdempotencyReplayed (chargebee-node's
		// src/coreCommon.ts). Unread, a subscription another request
		// created under the key was settled as ours.
		{"Chargebee-Idempotency-Replayed": {"true"}},
	} {
		for name, val := range h {
			t.Run(name+"="+val[0], func(t *testing.T) {
				v := newVendor(t, shape{status: 201, header: h, body: `{"id":"ord_someone_elses"}`})
				res, err := v.submit(t)
				requireForeignKey(t, res, err)
				v.requireKeys(t, "Idempotency-Key", "k", 1)
			})
		}
	}
}

// Worldline's GlobalCollect platform (Worldline Direct, Ingenico, PAYONE)
// answers every request after the first with its key with the first
// one's time in X-GCS-Idempotence-Request-Timestamp, and with the first
// one's answer "even with different payloads"; or with 409 while the
// first still runs.
// https://docs.direct.worldline-solutions.com/en/integration/api-developer-guide/idempotent-requests
func TestWorldlineFollowUpAnswers(t *testing.T) {
	worldline := idem.WithKeyHeader("X-GCS-Idempotence-Key", idem.KeyBare)
	followUp := http.Header{"X-Gcs-Idempotence-Request-Timestamp": {"1700000000000"}}
	payout := `{"id":"000000123410000595980000100001","payoutOutput":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"}},"status":"PAYOUT_REQUESTED"}`
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	t.Run("to a key nothing of ours used: another request's answer", func(t *testing.T) {
		v := newVendor(t, shape{status: http.StatusCreated, header: followUp, body: payout})
		res, err := v.submit(t, worldline)
		requireForeignKey(t, res, err)
		v.requireKeys(t, "X-GCS-Idempotence-Key", "k", 1)
	})
	t.Run("after a lost response: ours", func(t *testing.T) {
		v := newVendor(t, lost, shape{status: http.StatusCreated, header: followUp, body: payout})
		res, err := v.submit(t, worldline)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "000000123410000595980000100001", res.ResourceID)
		require.True(t, res.Replayed)
		v.requireKeys(t, "X-GCS-Idempotence-Key", "k", 2)
	})
	t.Run("429 on a follow-up: throttled, not a stored refusal", func(t *testing.T) {
		v := newVendor(t, lost, shape{status: http.StatusTooManyRequests, header: followUp, body: `{"errorId":"1","errors":[{"httpStatusCode":429}]}`})
		res, err := v.submit(t, worldline)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NotErrorIs(t, err, idem.ErrFailed)
		require.NotEqual(t, idem.StateFailed, res.State)
		v.requireKeys(t, "X-GCS-Idempotence-Key", "k", 5)
	})
	t.Run("409 while the first runs: in flight, not a stored refusal", func(t *testing.T) {
		v := newVendor(t, lost, shape{status: http.StatusConflict, header: followUp,
			body: `{"errorId":"657b10da-d2f9-4d7c-9f3b-4d3b4b1a2c3d","errors":[{"httpStatusCode":409}]}`})
		res, err := v.submit(t, worldline)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NotErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, idem.StateProcessing, res.State)
		v.requireKeys(t, "X-GCS-Idempotence-Key", "k", 5)
	})
}

// PPRO answers a key whose request it processed with the stored answer,
// marked Request-Idempotency: true
// (https://developerhub.ppro.com/global-api/reference/api-idempotency):
// after a lost response, our own charge.
func TestPPROReplayAfterALostResponse(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	v := newVendor(t, lost, shape{status: http.StatusCreated, header: http.Header{"Request-Idempotency": {"true"}},
		body: `{"id":"charge_a1b2c3","status":"CAPTURED"}`})
	res, err := v.submit(t, idem.WithKeyHeader("Request-Idempotency-Key", idem.KeyBare))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "charge_a1b2c3", res.ResourceID)
	require.True(t, res.Replayed)
	v.requireKeys(t, "Request-Idempotency-Key", "k", 2)
}
