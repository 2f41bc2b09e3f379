package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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

// A first attempt's refusal over the response cap is whole as the server
// sent it: only its start is kept, and every copy of it would be cut at
// the same byte. Taken for one cut in transit, it was sent again and
// again (5 sends, pending, and as many again on every Resume), a plain
// refusal never settled. It fails on its status, once.
func TestRefusalOverTheResponseCapFailsOnce(t *testing.T) {
	var mu sync.Mutex
	submits := 0
	details := strings.Repeat("x", 2<<20) // past the default 1 MiB cap
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		submits++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","details":"` + details + `"}}`))
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	mu.Lock()
	require.Equal(t, 1, submits, "a whole refusal over the cap is not sent again")
	mu.Unlock()
}
