package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Mastercard Send answers a payment transfer whose receiving bank timed
// out 201 with "status": "UNKNOWN", nested under "transfer": "Do not
// resubmit a transaction that has an 'UNKNOWN' status, because the
// original transaction may have been processed successfully"; look it up
// by its transfer_reference after a minute, and up to 24 hours
// (developer.mastercard.com/mastercard-send-funding/documentation/
// response-error-codes/unknown-response/; GET by reference:
// .../mastercard-send-person-to-person/documentation/use-cases/
// retrieve-transfer/). Its lookup answers a list, modelled here on the
// family's documented getMerchantTransferByRef
// ({"merchant_transfers":{"data":{"merchant_transfer":[…]}}}).
// TestUnknownResourceStatusIsNotSucceeded reads a top-level "UNKNOWN";
// here the real nesting, which DecodeJSON cannot read: with the
// transfer_reference as the key in the body, the one transfer is only
// asked about, by the call, by Resume and once it has been approved,
// never resubmitted, and never reported made or failed by a decoder
// that does not read it.
func TestMastercardSendUnknownTransferIsNeverResubmitted(t *testing.T) {
	const ref = "pay_000001328"
	transfer := func(status string) string {
		return `{"id":"trn_1357924680","resource_type":"transfer","transfer_reference":"` + ref + `","payment_type":"P2P",` +
			`"transfer_amount":{"value":"2000","currency":"USD"},"created":"2026-12-05T10:00:00-05:00","status":"` + status + `",` +
			`"status_timestamp":"2026-12-05T10:00:40-05:00"}`
	}
	var (
		mu     sync.Mutex
		posts  int
		refs   []string // the ref of every lookup
		bodies []string
		status = "UNKNOWN"
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			refs = append(refs, r.URL.Query().Get("ref"))
			_, _ = fmt.Fprintf(w, `{"transfers":{"resource_type":"list","item_count":"1","data":{"transfer":[%s]}}}`, transfer(status))
			return
		}
		posts++
		bodies = append(bodies, string(body))
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"transfer":%s}`, transfer("UNKNOWN"))
	}))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithResultEndpoint("/send/v1/partners/ptnr_1/transfers?ref={key}"))
	body := `{"payment_transfer":{"transfer_reference":"` + ref + `","payment_type":"P2P","amount":"2000","currency":"USD",` +
		`"sender_account_uri":"pan:5299920210000277;exp=2077-08;cvc=123","recipient_account_uri":"pan:5299920210000277;exp=2077-08"}}`

	res, err := c.Submit(t.Context(), idem.Request{Key: ref, URL: srv.URL + "/send/v1/partners/ptnr_1/transfers/payment", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed, "a transfer that may have been made was reported failed")
	require.NotEqual(t, idem.StateSucceeded, res.State, "a transfer its server calls UNKNOWN was reported made")

	for _, next := range []string{"UNKNOWN", "APPROVED"} {
		mu.Lock()
		status = next
		mu.Unlock()
		clock.Advance(10 * time.Minute)
		_, err = c.Resume(t.Context())
		require.NoError(t, err)
	}
	op, err := c.Lookup(t.Context(), "", ref)
	require.NoError(t, err)
	require.False(t, op.State == idem.StateSucceeded || op.State == idem.StateFailed,
		"settled %s by an answer the decoder cannot read", op.State)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, posts, "the transfer was resubmitted")
	require.Equal(t, []string{body}, bodies)
	require.NotEmpty(t, refs, "the transfer was never looked up")
	for i, r := range refs {
		require.Equalf(t, ref, r, "lookup %d: ref", i+1)
	}
}
