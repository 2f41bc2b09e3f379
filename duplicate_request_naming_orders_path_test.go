package idem_test

import (
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

// keyHeldServer keeps an Idempotency-Key header and answers a key whose
// request still runs 409 with an RFC 9457 problem titled "Duplicate
// request", its instance the request's path. Spring's ProblemDetail
// fills it so: "The instance property of ProblemDetail is set from the
// current URL path, if not already set"
// (docs.spring.io/spring-framework/reference/web/webmvc/mvc-ann-rest-exceptions.html,
// quoted in spring-projects/spring-framework#35969), so an order
// create's refusal carries "/v1/orders" whatever it is about. The title,
// and another request holding key k (a key collision), are modelled.
type keyHeldServer struct {
	srv  *httptest.Server
	held int    // 409s before the holder's answer is stored
	body string // the 409's body

	mu      sync.Mutex
	sends   map[string]int
	queries int
}

func newKeyHeldServer(t *testing.T, held int, body string) *keyHeldServer {
	t.Helper()
	s := &keyHeldServer{held: held, body: body, sends: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/v1/orders/by-key/") && r.Method == http.MethodGet {
			// The holder's order: the read path has it, whoever asks.
			s.queries++
			_, _ = io.WriteString(w, `{"id":"ord_other","status":"succeeded"}`)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		s.sends[key]++
		if s.sends[key] <= s.held {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, s.body)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ord_other","status":"succeeded"}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// Another request holds key k, still running: the server answers k's
// order create 409 "Duplicate request", its problem's instance
// "/v1/orders". A "Duplicate request" 409 is the key in flight (wait,
// resend, never query: the result endpoint would read the holder's
// order), but saysOrder found "orders" in the instance and the 409 was
// read as "Order already exists": never resent, the result endpoint
// asked by the key, and the holder's order ord_other settled k
// succeeded (1 submit, 1 query): an order counted made that was not
// ours. Now the duplicate must be the order's, not the request's: k is
// resent, the replayed answer leaves it unknown, ReviewKeyInUse, and the
// result endpoint is never asked.
func TestDuplicateRequestNamingTheOrdersPathIsTheKeyInFlight(t *testing.T) {
	requireOrderKeyInFlight(t, "k", `{"type":"about:blank","title":"Duplicate request","status":409,"instance":"/v1/orders"}`)
}

// requireOrderKeyInFlight submits an order create under key to a keyHeldServer
// answering body twice, and requires the 409s read as the key in flight:
// resent, unknown ReviewKeyInUse, the result endpoint never asked.
func requireOrderKeyInFlight(t *testing.T, key, body string) {
	t.Helper()
	s := newKeyHeldServer(t, 2, body)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: s.srv.URL + "/v1/orders",
		ResultURL: s.srv.URL + "/v1/orders/by-key/" + key, Body: []byte(`{"reference":"o-1","amount":100}`)})
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewKeyInUse, res.Review)
	require.Empty(t, res.ResourceID, "the holder's order is not ours")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, map[string]int{key: 3}, s.sends, "resent while the key's request runs, then its stored answer")
	require.Zero(t, s.queries, "the key's request may be another's: never asked by the key")
}

// A 409 to an order create whose words are about the key, not the
// order, is the key's in flight too, though it says "order" and "already
// exists": one naming the key ("An order with this key already
// exists"), giving its value, saying the request is the duplicate ("for
// this request", "A request for this order"), "already processed" (as
// "Request already processed" is the key's), or that something still
// runs. Each was read as "Order already exists" (a248072): 1 submit, the
// result endpoint asked by the key, the holder's ord_other settled ours
// succeeded; before it, 3 submits, unknown ReviewKeyInUse, 0 queries.
// The wordings are modelled: no page in reach gives them; each is a way
// a server keeping the key may say another request holds it.
func TestOrderExistsWordsAboutTheKeyAreTheKeyInFlight(t *testing.T) {
	for _, tc := range []struct{ name, key, body string }{
		{"with this key", "k", `{"title":"Conflict","status":409,"detail":"An order with this key already exists"}`},
		{"with the same key", "k", `{"message":"Order with the same key already exists"}`},
		{"for this key", "k", `{"message":"Order already exists for this key"}`},
		{"for this request", "k", `{"message":"Order already exists for this request"}`},
		{"key value", "key-7f3a9c21", `{"message":"Order key-7f3a9c21 already exists"}`},
		{"request_id", "7f3a9c21-0b4e", `{"message":"Order already exists","request_id":"7f3a9c21-0b4e"}`},
		{"a request for", "k", `{"message":"A request for this order already exists"}`},
		{"processed", "k", `{"message":"Order already processed"}`},
		{"is processing", "k", `{"message":"Order already exists and is processing"}`},
		{"pending", "k", `{"message":"Order already exists","status":"pending"}`},
		{"retry later", "k", `{"message":"Order already exists, retry later"}`},
		{"concurrent", "k", `{"message":"Order already exists (concurrent submission)"}`},
		// The same words beside "already paid" (paidRefusal's paid
		// reading): the key's in flight too.
		{"paid with this key", "k", `{"message":"An order with this key is already paid"}`},
		{"paid, retry later", "k", `{"message":"Order already paid, retry later"}`},
	} {
		t.Run(tc.name, func(t *testing.T) { requireOrderKeyInFlight(t, tc.key, tc.body) })
	}
}
