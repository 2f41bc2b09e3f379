package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Some payment APIs create the payment and say they do not know yet how
// it ended: Mastercard Send's transfer "status": "UNKNOWN" (a timeout
// towards the receiving network; "Do not resubmit a transaction that has
// an 'UNKNOWN' status, because the original transaction may have been
// processed successfully", look it up after a minute;
// developer.mastercard.com/mastercard-send-funding/documentation/
// response-error-codes/unknown-response), TabaPay's transaction
// "UNKNOWN" ("could have been successful or not",
// developers.tabapay.com/reference-link/transaction-resource-status),
// Xendit's payment request UNKNOWN (xendit-php PaymentRequestStatus).
// DecodeJSON took the word as any other status, a resource created: the
// call said succeeded for a payment its server says it cannot vouch for,
// and one that ends declined was never asked about again. It is the
// outcome not known yet: processing, settled by the result endpoint.
func TestUnknownResourceStatusIsNotSucceeded(t *testing.T) {
	var mu sync.Mutex
	creates, queries := 0, 0
	decided := false // the receiving bank has answered: the transfer is declined
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/transfers/") {
			queries++
			status := "UNKNOWN"
			if decided {
				status = "DECLINED"
			}
			_, _ = fmt.Fprintf(w, `{"id":"tr_1","status":%q}`, status)
			return
		}
		creates++
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"tr_1","amount":"100.00","status":"UNKNOWN"}`)
	}))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithResultEndpoint("/transfers/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/transfers", Body: []byte(`{"amount":"100.00"}`)})
	require.NotEqual(t, idem.StateSucceeded, res.State, "a transfer its server calls UNKNOWN was reported succeeded")
	require.NotErrorIs(t, err, idem.ErrFailed, "a transfer that may have been made was reported failed")
	require.Equal(t, "tr_1", res.ResourceID)

	mu.Lock()
	decided = true
	mu.Unlock()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Failed, "Resume: %+v", sum)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, op.State)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, creates, "the transfer was sent again")
}
