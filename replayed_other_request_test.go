package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// keyReplayingServer is a server that answers a key it holds with the
// key's stored answer, whatever the body, marked as a replay: stored
// holds the answers it keeps by key, which a test may fill with another
// request's. The first cutBefore posts are cut before the server reads
// them (nothing executes); the next cutAfter once their resource is made
// (make, of the request's body and the count of resources made) and
// stored.
type keyReplayingServer struct {
	keyHeader           string
	marker              http.Header
	status              int
	make                func(body []byte, n int) string
	cutBefore, cutAfter int

	mu     sync.Mutex
	stored map[string]string
	made   []string // the key of each resource made
	keys   []string // each post's key
	bodies []string // each post's body
}

func (f *keyReplayingServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	b, _ := io.ReadAll(r.Body)
	key := r.Header.Get(f.keyHeader)
	f.mu.Lock()
	f.keys = append(f.keys, key)
	f.bodies = append(f.bodies, string(b))
	n := len(f.keys)
	if n <= f.cutBefore {
		f.mu.Unlock()
		dropConnection(w)
		return
	}
	answer, replay := f.stored[key]
	if !replay {
		f.made = append(f.made, key)
		answer = f.make(b, len(f.made))
		f.stored[key] = answer
	}
	f.mu.Unlock()
	if !replay && n <= f.cutBefore+f.cutAfter {
		dropConnection(w)
		return
	}
	if replay {
		for name, vs := range f.marker {
			w.Header()[name] = vs
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, answer)
}

// requireSent asserts the server got posts posts, each with key k and
// body, and made the resources listed by key.
func (f *keyReplayingServer) requireSent(t *testing.T, body string, posts int, made []string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, slices.Repeat([]string{"k"}, posts), f.keys, "keys of the posts")
	require.Equal(t, slices.Repeat([]string{body}, posts), f.bodies, "bodies of the posts")
	require.Equal(t, made, f.made, "resources made, by key")
}

// requireOwnReplaySettled asserts a call settled succeeded with id, the
// answer a replay.
func requireOwnReplaySettled(t *testing.T, res *idem.Result, err error, id string) {
	t.Helper()
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, id, res.ResourceID)
	require.True(t, res.Replayed)
}

// flutterwaveKeyStore is Flutterwave's v4 POST /charges as its docs
// describe its keys (developer.flutterwave.com/docs/idempotency): "When a
// subsequent request is made with the same idempotency key, we return the
// original response associated with the first request that used that
// key", marked "X-Idempotency-Cache-Hit: true"; nothing there compares
// the later request's body with the first's. Its charge echoes the
// request's amount, currency and reference in "data"; with bare, none of
// them. stored holds the answers it keeps by key, which a test may fill
// with another request's charge: a key shared with another service, or
// derived from a business id that another order used first.
func flutterwaveKeyStore(cutBefore, cutAfter int, bare bool, stored map[string]string) *keyReplayingServer {
	return &keyReplayingServer{keyHeader: "X-Idempotency-Key", status: http.StatusCreated,
		marker:    http.Header{"X-Idempotency-Cache-Hit": {"true"}},
		cutBefore: cutBefore, cutAfter: cutAfter, stored: stored,
		make: func(b []byte, n int) string {
			var req struct {
				Amount    json.Number `json:"amount"`
				Currency  string      `json:"currency"`
				Reference string      `json:"reference"`
			}
			_ = json.Unmarshal(b, &req)
			id := fmt.Sprintf("chg_%d", n)
			if bare {
				return fmt.Sprintf(`{"status":"success","message":"Charge created","data":{"id":%q,"status":"succeeded"}}`, id)
			}
			return flutterwaveV4Charge(id, req.Amount.String(), req.Currency, req.Reference)
		}}
}

// flutterwaveV4Charge is a charge's answer as Flutterwave's v4 API gives it.
func flutterwaveV4Charge(id, amount, currency, reference string) string {
	return fmt.Sprintf(`{"status":"success","message":"Charge created","data":{"id":%q,"amount":%s,"currency":%q,`+
		`"customer_id":"cus_3XarBILKQS","payment_method_id":"pmd_4Xk2lIO1sK","reference":%q,"status":"succeeded"}}`, id, amount, currency, reference)
}

// decodeFlutterwaveV4 reads a v4 charge's answer: its data's status,
// "succeeded", "pending" or "failed".
func decodeFlutterwaveV4(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Status string `json:"status"`
		Data   *struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.Status != "success" || v.Data == nil || v.Data.ID == "" {
		return idem.Outcome{}, fmt.Errorf("not a Flutterwave charge")
	}
	switch v.Data.Status {
	case "succeeded":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data.ID}, nil
	case "pending":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.Data.ID}, nil
	case "failed":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.Data.ID, Reason: "failed"}, nil
	}
	return idem.Outcome{}, fmt.Errorf("charge status %q", v.Data.Status)
}

// A server that answers a key it holds with the key's stored answer,
// whatever the request (Flutterwave above; Worldline Direct likewise "will
// respond with the same outcome as the original request, even with
// different payloads", docs.direct.worldline-solutions.com, Idempotent
// requests), replays another request's charge to ours when the key
// collided: another service's, or another order's that the key's business
// id named first. After a send of ours that may have executed (its
// connection cut), idem took that replay for ours: settled succeeded
// with the other charge (chg_1, 2500 NGN, order-0950) for our order of
// 1000 NGN, which was never charged, and the caller ships it. Its amount
// or currency not ours, it is now flagged for a person (ReviewKeyInUse,
// ErrKeyConflict), the error naming the difference, nothing settled as
// ours and never resent (a resend is replayed the same); so too when the
// replay reaches Resume after a restart. A replay describing our own
// charge, or echoing nothing to compare, still settles it.
func TestReplayedSuccessOfAnotherRequestIsNotOurs(t *testing.T) {
	body := `{"amount":1000,"currency":"NGN","customer_id":"cus_3XarBILKQS","payment_method_id":"pmd_4Xk2lIO1sK","reference":"order-1001"}`
	key, decode := idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare), idem.WithDecoder(decodeFlutterwaveV4)
	for _, tt := range []struct {
		name  string
		other string // the stored answer of another request under the key
		how   string // how the error says it differs
	}{
		{name: "another amount", other: flutterwaveV4Charge("chg_1", "2500", "NGN", "order-0950"),
			how: `amount "2500", not the request's amount "1000"`},
		{name: "another currency", other: flutterwaveV4Charge("chg_1", "1000", "GHS", "order-0950"),
			how: `currency "GHS", not the request's currency "NGN"`},
	} {
		t.Run(tt.name+": after a cut send", func(t *testing.T) {
			f := flutterwaveKeyStore(1, 0, false, map[string]string{"k": tt.other})
			srv := httptest.NewServer(http.HandlerFunc(f.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), key, decode)

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(body)})
			requireForeignKey(t, res, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, body, 2, nil)
		})
		t.Run(tt.name+": replayed to Resume after a restart", func(t *testing.T) {
			f := flutterwaveKeyStore(idem.DefaultMaxAttempts, 0, false, map[string]string{"k": tt.other})
			srv := httptest.NewServer(http.HandlerFunc(f.serve))
			t.Cleanup(srv.Close)
			// The clock at the server's: a restart weighs the key window
			// by its answers' Date too.
			open, closeAll := restarts(t, idem.WithHTTPClient(srv.Client()), idem.WithClock(idemtest.NewClock(time.Now())), key, decode)

			store, c := open()
			_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(body)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			closeAll(store, c)

			store, c = open()
			defer closeAll(store, c)
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, idem.Summary{Visited: 1, Review: 1}, sum)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, body, idem.DefaultMaxAttempts+1, nil)
			// Flagged, it is not sent again.
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			requireReviewedNotOurs(t, c, tt.how)
			f.requireSent(t, body, idem.DefaultMaxAttempts+1, nil)
		})
	}
	for _, tt := range []struct {
		name string
		bare bool
	}{
		{name: "describing ours"},
		{name: "echoing nothing to compare", bare: true},
	} {
		t.Run("our own charge replayed, "+tt.name+": settles", func(t *testing.T) {
			f := flutterwaveKeyStore(0, 1, tt.bare, map[string]string{})
			srv := httptest.NewServer(http.HandlerFunc(f.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), key, decode)

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(body)})
			requireOwnReplaySettled(t, res, err, "chg_1")
			f.requireSent(t, body, 2, []string{"k"})
		})
	}
}

// requireReviewedNotOurs asserts the journal holds the operation under k
// open, flagged ReviewKeyInUse, with no resource taken for ours, its last
// attempt's error saying how the answer differs from the request.
func requireReviewedNotOurs(t *testing.T, c *idem.Client, how string) {
	t.Helper()
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyInUse, op.Review)
	require.Empty(t, resourceOf(op), "another request's charge journaled as ours")
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Contains(t, rec.Attempts[len(rec.Attempts)-1].Err, how)
}
