package idem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Two orders of one amount and currency under a key that collided (a key
// shared with another service, or taken from a business id another order
// used first): the server replays the key's stored answer whatever the
// body (Flutterwave's "original response associated with the first
// request that used that key"; Worldline Direct's "same outcome as the
// original request, even with different payloads"), and after a send of
// ours that may have run (its connection cut), the replay of the other
// order's payment was settled succeeded as ours: 2 posts, no payment of
// ours made, and our order-1001 shipped unpaid. Amount and currency
// alike, the one member telling them apart is the merchant's reference
// the request carries and the answer echoes: Flutterwave's v4 charge
// echoes "reference" in its data (flutterwaveKeyStore); Worldline's
// payment "paymentOutput.references.merchantReference" for the request's
// "order.references.merchantReference" (worldlineKeyStore; its migration
// guide maps the legacy ORDERID to order.references.merchantReference);
// its payout "payoutOutput.references.merchantReference" for the
// request's top-level "references.merchantReference"
// (worldlinePayoutStore), that payoutOutput read nowhere, so the
// replay of another payout of our amount settled as ours (2 posts, no
// payout of ours made, our payee never paid).
// Another reference is now another request's: flagged ReviewKeyInUse,
// nothing settled as ours, never resent; so is one whose reference only
// begins ours (order-1 for our order-12, sequential order numbers),
// shorter than any scheme cuts a reference to (referenceCut), which was
// taken for ours cut and settled. Our own payment replayed, its
// reference ours, still settles.
func TestReplayedPaymentOfAnotherOrderOfTheSameAmount(t *testing.T) {
	flutterwave := `{"amount":1000,"currency":"NGN","customer_id":"cus_3XarBILKQS","payment_method_id":"pmd_4Xk2lIO1sK","reference":"order-1001"}`
	flutterwaveSequential := `{"amount":1000,"currency":"NGN","customer_id":"cus_3XarBILKQS","payment_method_id":"pmd_4Xk2lIO1sK","reference":"order-12"}`
	flutterwaveOpts := []idem.Option{idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare), idem.WithDecoder(decodeFlutterwaveV4)}
	flutterwaveStore := func(cutBefore, cutAfter int, stored map[string]string) *keyReplayingServer {
		return flutterwaveKeyStore(cutBefore, cutAfter, false, stored)
	}
	worldline := `{"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","token":"0ca037cc-9cb0-4a9f-8c3b-6c9e5d1e2f30"},` +
		`"order":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"},"references":{"merchantReference":"order-1001"}}}`
	for _, tt := range []struct {
		name, body, url string
		opts            []idem.Option
		store           func(cutBefore, cutAfter int, stored map[string]string) *keyReplayingServer
		other           string // another order's answer stored under the key
		how             string
		ownID           string // our own payment's id, replayed
	}{
		{name: "flutterwave", body: flutterwave, url: "/charges", opts: flutterwaveOpts, store: flutterwaveStore,
			other: flutterwaveV4Charge("chg_1", "1000", "NGN", "order-1002"),
			how:   `reference "order-1002", not the request's reference "order-1001"`, ownID: "chg_1"},
		{name: "flutterwave, sequential order numbers", body: flutterwaveSequential, url: "/charges", opts: flutterwaveOpts, store: flutterwaveStore,
			other: flutterwaveV4Charge("chg_1", "1000", "NGN", "order-1"),
			how:   `reference "order-1", not the request's reference "order-12"`, ownID: "chg_1"},
		{name: "worldline", body: worldline, url: "/v2/1234/payments",
			opts: []idem.Option{idem.WithKeyHeader("X-GCS-Idempotence-Key", idem.KeyBare), idem.WithDecoder(decodeWorldlinePayment)},
			store: func(cutBefore, cutAfter int, stored map[string]string) *keyReplayingServer {
				return worldlineKeyStore(cutBefore, cutAfter, 0, stored)
			},
			other: worldlinePayment("3066019730_0", 1000, "EUR", "order-1002", 0),
			how:   `references.merchantReference "order-1002", not the request's order.references.merchantReference "order-1001"`, ownID: "3066019731_0"},
		{name: "worldline payout", body: worldlinePayoutRequest, url: "/v2/1234/payouts",
			opts:  []idem.Option{idem.WithKeyHeader("X-GCS-Idempotence-Key", idem.KeyBare), idem.WithDecoder(decodeWorldlinePayout)},
			store: worldlinePayoutStore,
			other: worldlinePayout("4066019730_0", 1000, "EUR", "payout-1002"),
			how:   `references.merchantReference "payout-1002", not the request's references.merchantReference "payout-1001"`, ownID: "4066019731_0"},
	} {
		submit := func(t *testing.T, f *keyReplayingServer) (*idem.Client, *idem.Result, error) {
			srv := httptest.NewServer(http.HandlerFunc(f.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), tt.opts...)
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + tt.url, Body: []byte(tt.body)})
			return c, res, err
		}
		t.Run(tt.name+": another order's payment replayed after a cut send", func(t *testing.T) {
			f := tt.store(1, 0, map[string]string{"k": tt.other})
			c, res, err := submit(t, f)
			requireForeignKey(t, res, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, tt.body, 2, nil)
			// Flagged, it is not sent again.
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, tt.body, 2, nil)
		})
		t.Run(tt.name+": our own payment replayed settles", func(t *testing.T) {
			f := tt.store(0, 1, map[string]string{})
			_, res, err := submit(t, f)
			requireOwnReplaySettled(t, res, err, tt.ownID)
			f.requireSent(t, tt.body, 2, []string{"k"})
		})
	}
}

// A 409 carrying the key's first answer (conflictReplayPayouts:
// Interchecks, DOKU) that shows it is about our key by the key at a
// member named as one ("idempotency_key"; modelled, as DOKU echoes its
// request id) but echoes another merchantRefNum, of our amount and
// currency, is another request's payout held under the key: it settled
// succeeded as ours with that payout (pmt_77aa01). Now flagged
// ReviewKeyInUse, nothing taken for ours, never resent (2 submits). The answer that proves it ours by our own
// reference (echoesReference) still settles
// (TestConflictCarryingTheOriginalAnswerSettles).
func TestConflictCarryingAnotherOrdersPayoutOfTheSameAmount(t *testing.T) {
	s := &conflictReplayPayouts{lostFirst: true,
		answer: `{"id":"pmt_77aa01","idempotency_key":"k","merchantRefNum":"payout-2026-0007","amount":"25.00","currency":"USD","status":"PAID"}`}
	c, res, err := s.submit(t, "4444333322221111")
	requireForeignKey(t, res, err)
	requireReviewedNotOurs(t, c, `merchantRefNum "payout-2026-0007", not the request's merchantRefNum "payout-2026-0042"`)
	s.requireSent(t, 1, 2)
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	s.requireSent(t, 1, 2)
}
