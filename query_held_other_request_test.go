package idem_test

import (
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

// sharedKeyServer holds, under the key, another request's payment: a key
// derived from a business id and reused with another amount, or a key
// space shared with another service (see
// TestResultQueryFindingAnotherRequestIsNotOurs). Its result endpoint
// answers the key's payment whoever asks, first in the short form of a
// payment still running (the state and resource protocol DecodeJSON
// reads), then, once it has succeeded, as the payment object itself,
// Stripe's PaymentIntent (https://docs.stripe.com/api/payment_intents/object:
// "amount", "currency", "status"). The submit's connection drops after
// the request is written and before anything is made: nothing of ours
// executed.
type sharedKeyServer struct {
	mu      sync.Mutex
	result  string
	submits []string // each submit's body
	queries int
}

func (s *sharedKeyServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodPost {
		s.submits = append(s.submits, string(b))
		dropConnection(w)
		return
	}
	s.queries++
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, s.result)
}

func (s *sharedKeyServer) setResult(result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result = result
}

// requireQueriedResults submits the request setup gives, to a client of
// a sharedKeyServer whose result endpoint answers answer(theirs), the
// key's payment of another amount, then answer(ours), a copy of ours,
// and asserts what each made of it after Resume looked again: another
// request's, left for a person (requireOtherRequestsOp, names what
// differs); ours, succeeded with resource id. Either way the request was
// sent once, never resent, and the result endpoint asked twice for the
// other request's (the lost answer's query, Resume's) and once for ours.
func requireQueriedResults(t *testing.T, answer func(amount string) string, theirs, ours string,
	setup func(srv *httptest.Server, clock *idemtest.Clock) (*idem.Client, idem.Request), id, names string) {
	t.Helper()
	for _, tt := range []struct {
		name, amount string
		ours         bool
		queries      int
	}{
		{"another request's", theirs, false, 2},
		{"ours", ours, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			s := &sharedKeyServer{result: answer(tt.amount)}
			srv := httptest.NewServer(http.HandlerFunc(s.serve))
			t.Cleanup(srv.Close)
			c, req := setup(srv, clock)

			res, err := c.Submit(t.Context(), req)
			if tt.ours {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, id, res.ResourceID)
			} else {
				requireForeignKey(t, res, err)
			}
			clock.Advance(10 * time.Minute)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, req.Key)
			require.NoError(t, err)
			if tt.ours {
				require.Equal(t, idem.StateSucceeded, op.State)
				require.Empty(t, op.Review)
			} else {
				requireOtherRequestsOp(t, c, op, req.Key, names)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, []string{string(req.Body)}, s.submits, "submits: one, never resent")
			require.Equal(t, tt.queries, s.queries, "queries")
		})
	}
}

// A resource a result query named while it ran is the key's, not one our
// own request was answered with: the key's result may be another
// request's, and its short "processing" form said nothing to tell. Once
// the full answer shows another amount, it is another request's payment
// (flagged ReviewKeyInUse, as it is when no processing answer came
// first), not ours "amended" (the exemption a resource our own submit's
// answer named has): idem settled the intent succeeded with another
// request's payment, one of ours never made.
func TestProcessingQueryNamesNoResourceOfOurs(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	s := &sharedKeyServer{result: `{"state":"processing","resourceId":"pi_3Theirs"}`}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, clock, idem.WithResultEndpoint(srv.URL+"/v1/results/{key}"))
	const key, body = "pay-7", `{"amount":2000,"currency":"usd"}`

	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/v1/payment_intents", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateProcessing, res.State)

	s.setResult(`{"id":"pi_3Theirs","object":"payment_intent","amount":5000,"currency":"usd","status":"succeeded"}`)
	clock.Advance(10 * time.Minute)
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.NotEqual(t, idem.StateSucceeded, op.State, "settled with another request's payment")
	require.Equal(t, idem.ReviewKeyInUse, op.Review)

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{body}, s.submits, "submits: one, never resent")
}

// ownHeldServer answers the submit itself 202 Accepted, naming the
// payment it made and is still authorising, and its result endpoint
// answers the key's payment, set by setResult.
type ownHeldServer struct {
	sharedKeyServer
}

func (s *ownHeldServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.sharedKeyServer.serve(w, r)
		return
	}
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submits = append(s.submits, string(b))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"state":"processing","resourceId":"pay_1"}`)
}

// A resource our own submit's answer named stays ours when result
// queries name it too: an authorised payment's amount is updated in place
// (Adyen's authorisation adjustment, https://docs.adyen.com/online-payments/adjust-authorisation/),
// and the payment the full answer then shows, with its new amount, is
// the one our request made. Journaling the query's naming over our own
// answer's made it the key's, and the amended payment read as another
// request's (ReviewKeyInUse) for a person to settle.
func TestProcessingQueryKeepsOurOwnHeldResource(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	s := &ownHeldServer{sharedKeyServer{result: `{"state":"processing","resourceId":"pay_1"}`}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, clock, idem.WithResultEndpoint(srv.URL+"/v1/results/{key}"))
	const key, body = "pay-8", `{"amount":2000,"currency":"usd"}`

	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/v1/payments", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateProcessing, res.State)
	require.Equal(t, "pay_1", res.ResourceID)
	require.False(t, res.Replayed, "named by the answer to our own request")
	s.mu.Lock()
	require.Positive(t, s.queries, "the result endpoint named it too")
	s.mu.Unlock()

	s.setResult(`{"id":"pay_1","amount":2500,"currency":"usd","status":"authorised"}`)
	clock.Advance(10 * time.Minute)
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, "pay_1", resourceOf(op))
	require.Empty(t, op.Review)

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{body}, s.submits, "submits: one")
}
