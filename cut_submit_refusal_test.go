package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A first attempt's refusal whose body was cut in transit was judged by
// its status alone: Adyen's 422 errorCode 704 ("request already
// processed or in progress": another request holds the key, which may be
// a copy of this one a mesh retried, and may charge) cut before its
// words read as a plain 422, the payment failed, and the caller, told
// nothing was charged, paid again under a new key. The words that tell
// a refusal on its merits from "the key's request runs" may be in the
// part lost: the same bytes are sent again under the same key, and the
// whole answer is judged (here: another request's, for a person).
func TestCutFirstRefusalIsSentAgainNotFailed(t *testing.T) {
	var mu sync.Mutex
	submits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		submits++
		first := submits == 1
		mu.Unlock()
		body := adyenInProgress.body
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(adyenInProgress.status)
		if !first {
			_, _ = w.Write([]byte(body))
			return
		}
		// A hop's connection reset 24 bytes in, before "704" and the
		// words: modelled.
		_, _ = w.Write([]byte(body[:24]))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithDecoder(decodeAdyen))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
	require.NotErrorIs(t, err, idem.ErrFailed)
	requireForeignKey(t, res, err)
	mu.Lock()
	require.Equal(t, 2, submits, "the cut refusal's request sent again, once")
	mu.Unlock()
}
