package idem_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// xenditDuplicate is Xendit's refusal of an idempotency key used before
// with another request, as Xendit's own SDKs document it
// (xendit/xendit-php docs/Refund/CreateRefund409Response.md, generated
// from its OpenAPI; xendit-node's CreateRefund409Response and
// CreatePaymentMethod409Response enumerate DUPLICATE_ERROR and
// IDEMPOTENCY_ERROR for the 409).
const xenditDuplicate = `{"error_code":"DUPLICATE_ERROR","message":"duplicate value on idempotency_key, try again with a new key"}`

// xenditPayouts is Xendit's POST /v2/payouts as docs.xendit.co/apidocs/
// create-payout-v3 describes its Idempotency-Key: "Same Idempotency Key
// + same request body → returns the initial Payout Object from the
// first attempt" (unmarked), "Same Idempotency Key + different request
// body → DUPLICATE_ERROR", keys never expiring (xendit-go's
// CreatePayout: "No expiration"). It counts the payouts it makes and
// every request idem sends it.
type xenditPayouts struct {
	mu      sync.Mutex
	payouts int
	sent    int // requests idem sent (those with idem's User-Agent)
	bodies  map[string][]byte
	answers map[string]string
}

func (x *xenditPayouts) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Header.Get("X-Other-Service") == "" {
		x.sent++
	}
	w.Header().Set("Content-Type", "application/json")
	if first, ok := x.bodies[key]; ok {
		if !bytes.Equal(first, body) {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, xenditDuplicate)
			return
		}
		_, _ = io.WriteString(w, x.answers[key])
		return
	}
	x.payouts++
	x.bodies[key] = body
	x.answers[key] = fmt.Sprintf(`{"id":"disb-%d","reference_id":"payout-ref-002","amount":50000,"currency":"PHP",`+
		`"channel_code":"PH_GCASH","status":"ACCEPTED","created":"2026-12-05T10:00:00.000Z"}`, x.payouts)
	_, _ = io.WriteString(w, x.answers[key])
}

// Another service derived its payout's key from the same business id and
// paid first with its own body: Xendit refuses ours with 409
// DUPLICATE_ERROR, its final word for the key (it never expires). The
// words name the key and say it was used, not that a request still runs:
// read as the key in flight, the payout was resent with every backoff
// until the 72-hour reconciliation deadline, answered the same each
// time. Now it is the key used by another request, as a 409 saying
// "already used" is: flagged for a person at once, never failed (the
// words do not say ours differs), never resent, and the other service's
// payout never taken for ours.
func TestXenditDuplicateErrorToAKeyAnotherServiceUsed(t *testing.T) {
	x := &xenditPayouts{bodies: map[string][]byte{}, answers: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(srv.Close)

	other, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v2/payouts",
		bytes.NewReader([]byte(`{"reference_id":"order-7","amount":12000,"currency":"PHP"}`)))
	require.NoError(t, err)
	other.Header.Set("Idempotency-Key", "order-7")
	other.Header.Set("X-Other-Service", "refunds")
	resp, err := srv.Client().Do(other)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	c := clientFor(t, srv, idemtest.NewClock(epoch))
	req := idem.Request{Key: "order-7", URL: srv.URL + "/v2/payouts",
		Body: []byte(`{"reference_id":"order-7","amount":50000,"currency":"PHP"}`)}
	requireLeftForAPerson(t, c, req, "duplicate value on idempotency_key")

	x.mu.Lock()
	defer x.mu.Unlock()
	require.Equal(t, 1, x.payouts, "payouts: the other service's alone")
	require.Equal(t, 1, x.sent, "idem's sends: the refused one, nothing resent")
}

// Should Xendit answer DUPLICATE_ERROR to a resend of ours whose first
// copy's answer was lost (its refunds say "try again with a new key",
// and their docs do not say whether the same body is replayed), the
// refund may have been made: never failed, which would invite a second
// refund under a new key. A 409 after such a send was never counted
// among the refusals that leave an operation for a person, as a 4xx's
// are (a 409 in flight is no refusal of ours): resent by the call and by
// each visit of Resume and Run, the same answer every time, until the
// default 20-minute key window passed (20 sends, then flagged "key
// expired", though Xendit's keys never expire), or with Xendit's own
// window named, until the 72-hour reconciliation deadline. Now a 409
// saying the key was used counts as a 422 would: three in a row, and a
// person decides, nothing resent after.
func TestXenditDuplicateErrorAfterALostResponse(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`},
		shape{status: http.StatusConflict, body: xenditDuplicate})
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
	requireRefusedAfterSend(t, c, res, err, "k", "refund")
	v.requireKeys(t, "Idempotency-Key", "k", 4)

	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "still for a person: %+v", sum)
	v.requireKeys(t, "Idempotency-Key", "k", 4)
}

// Xendit's legacy disbursements (X-IDEMPOTENCY-KEY) never replay: "A
// response that's being replayed from the server because it had already
// executed previously can be identified by the error code
// DUPLICATE_TRANSACTION_ERROR" (developers.xendit.co's API reference,
// "Safely retry requests with idempotency"), whose words are "Idempotency
// key has been used before. Use a unique idempotency key and try again."
// (docs.xendit.co/xendisburse/disbursement-errors). Neither page gives its
// status: both a 400 and a 409 are tried. Behind a sidecar that retried
// the first copy's 503 (retryingSidecar), that error to idem's first
// attempt refuses the copy of a disbursement that was made: failed, it
// invites the same disbursement under a new key. A key "used before" is
// the key's "already used", as the README's outcome table says: flagged
// for a person, never resent.
func TestXenditDuplicateTransactionToAFirstAttemptBehindAMesh(t *testing.T) {
	const refusal = `{"error_code":"DUPLICATE_TRANSACTION_ERROR",` +
		`"message":"Idempotency key has been used before. Use a unique idempotency key and try again."}`
	for _, status := range []int{http.StatusBadRequest, http.StatusConflict} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var (
				mu            sync.Mutex
				disbursements int
				sends         int
				used          = map[string]bool{}
			)
			sidecar := retryingSidecar(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				key := r.Header.Get("X-Idempotency-Key")
				mu.Lock()
				defer mu.Unlock()
				sends++
				if used[key] {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					_, _ = io.WriteString(w, refusal)
					return
				}
				used[key] = true
				disbursements++
				podReset(w)
			})
			c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare))
			req := idem.Request{Key: "disb-7", URL: sidecar.URL + "/disbursements",
				Body: []byte(`{"external_id":"disb-7","bank_code":"BCA","account_holder_name":"Joe","account_number":"1234567890","amount":90000}`)}
			requireLeftForAPerson(t, c, req, "Idempotency key has been used before")

			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 1, disbursements, "disbursements")
			require.Equal(t, 2, sends, "the copies: ours and the sidecar's, nothing resent")
		})
	}
}
