package idem_test

import (
	"encoding/json"
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

// firstAnswerServer is a create endpoint that keeps, per key in its key
// header, the first request's answer and gives it to every later request
// with the key whatever that request's body (PayPal's PayPal-Request-Id,
// Mercado Pago's X-Idempotency-Key): while the key's first request still
// runs, busy answers of busyBody come first. A key it has not seen makes
// a resource, answered by answer from the request's body.
type firstAnswerServer struct {
	header   string
	busyBody string
	answer   func(id int, body []byte) string

	mu     sync.Mutex
	busy   int               // busy answers left before the key's first request is done
	stored map[string]string // key -> the first request's answer
	keys   []string          // each POST's key header
	made   int               // resources this server made
}

func (f *firstAnswerServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Header.Get(f.header)
	f.keys = append(f.keys, key)
	w.Header().Set("Content-Type", "application/json")
	if stored, ok := f.stored[key]; ok {
		if f.busy > 0 {
			f.busy--
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, f.busyBody)
			return
		}
		_, _ = io.WriteString(w, stored)
		return
	}
	f.made++
	f.stored[key] = f.answer(f.made, body)
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, f.stored[key])
}

// start serves f on 127.0.0.1 and returns a client sending the key in
// f's header, resources read by decode.
func (f *firstAnswerServer) start(t testing.TB, decode idem.Decoder) (*httptest.Server, *idem.Client) {
	t.Helper()
	if f.stored == nil {
		f.stored = map[string]string{}
	}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return srv, clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader(f.header, idem.KeyBare), idem.WithDecoder(decode))
}

// requireKeys asserts n posts, each with key in f's header, and made
// resources made.
func (f *firstAnswerServer) requireKeys(t testing.TB, key string, n, made int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	requireEach(t, f.keys, n, key, f.header)
	require.Equal(t, made, f.made, "resources made")
}

// decodeStatusID reads an answer's "id" (a string or a number) as the
// resource, succeeded when its "status" is one of done.
func decodeStatusID(done ...string) idem.Decoder {
	return func(a *idem.Answer) (idem.Outcome, error) {
		var v struct {
			ID     json.RawMessage `json:"id"`
			Status string          `json:"status"`
		}
		if err := json.Unmarshal(a.Body, &v); err != nil || len(v.ID) == 0 {
			return idem.Outcome{}, fmt.Errorf("no resource: %w", err)
		}
		id := string(v.ID)
		var s string
		if json.Unmarshal(v.ID, &s) == nil {
			id = s
		}
		for _, d := range done {
			if v.Status == d {
				return idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, nil
			}
		}
		return idem.Outcome{State: idem.StateProcessing, ResourceID: id}, nil
	}
}

// requireOtherRequestsAnswer asserts that a Submit whose key another
// request held (two 409s, then that request's stored answer of status
// last) ended left for a person, nothing of the other request journaled
// as ours, the member that differs, names, in the last attempt's error.
func requireOtherRequestsAnswer(t testing.TB, c *idem.Client, key string, res *idem.Result, err error, last int, names string) {
	t.Helper()
	requireForeignKey(t, res, err)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.True(t, rec.Open())
	require.Equal(t, idem.ReviewKeyInUse, rec.Review)
	require.Nil(t, rec.Result, "another request's answer journaled as ours")
	require.Len(t, rec.Attempts, 3)
	require.Equal(t, []int{http.StatusConflict, http.StatusConflict, last},
		[]int{rec.Attempts[0].Status, rec.Attempts[1].Status, rec.Attempts[2].Status})
	require.Contains(t, rec.Attempts[2].Err, names, "the attempt names what differs")
}

// requireOursAfterTheKeyWasHeld submits req and asserts that the stored
// answer of a copy of ours, after two 409s, settled it succeeded with
// resource, no person asked: three posts with the key, one resource made.
func (f *firstAnswerServer) requireOursAfterTheKeyWasHeld(t testing.TB, c *idem.Client, req idem.Request, resource string) {
	t.Helper()
	res, err := c.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, resource, res.ResourceID)
	require.Empty(t, res.Review)
	f.requireKeys(t, req.Key, 3, 1)
}
