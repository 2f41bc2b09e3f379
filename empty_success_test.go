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

// klarnaOM models Klarna's Order Management API: a capture is answered
// 201 Created with the capture in the Location and Capture-Id headers and
// no body, a cancel 204 No Content; a request resent with the
// Klarna-Idempotency-Key gets the same answer and changes nothing.
// https://docs.klarna.com/order-management/manage-orders-with-the-api/capture-and-track-orders/capture-the-full-order-amount/
// https://docs.klarna.com/order-management/integration-guide/retrieve-an-order/cancel-an-authorized-order/
type klarnaOM struct {
	srv *httptest.Server
	mu  sync.Mutex
	// effects: key → capture id ("" for a cancel), once per key.
	effects map[string]string
	posts   []submitSeen
	queries int
	// timeouts: how many first submits get a gateway's 504 after the
	// capture was made.
	timeouts int
}

func newKlarnaOM(t testing.TB, timeouts int) *klarnaOM {
	t.Helper()
	k := &klarnaOM{effects: map[string]string{}, timeouts: timeouts}
	k.srv = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *klarnaOM) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.Method == http.MethodGet {
		// A search by key that finds nothing (yet): no content.
		k.queries++
		w.WriteHeader(http.StatusNoContent)
		return
	}
	key := r.Header.Get("Klarna-Idempotency-Key")
	k.posts = append(k.posts, submitSeen{key, body})
	if _, done := k.effects[key]; !done {
		id := ""
		if strings.HasSuffix(r.URL.Path, "/captures") {
			id = "4ba29b50-be7b-44f5-a492-113e6a865e22"
		}
		k.effects[key] = id
	}
	if k.timeouts > 0 {
		k.timeouts--
		w.WriteHeader(http.StatusGatewayTimeout)
		return
	}
	if id := k.effects[key]; id != "" {
		w.Header().Set("Location", "https://"+r.Host+r.URL.Path+"/"+id)
		w.Header().Set("Capture-Id", id)
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// requireEffects asserts one effect for the key and posts submits, each
// with the key and the journaled bytes.
func (k *klarnaOM) requireEffects(t testing.TB, posts, queries int) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	require.Len(t, k.effects, 1, "captures or cancels made")
	requireSubmits(t, k.posts, posts)
	require.Equal(t, queries, k.queries, "result queries")
}

// A 201 Created or 204 No Content with no body is the server's answer
// that it did what was asked: there is no body to decode, and none will
// come. Read as an undecodable body, the capture was resent five times,
// reported unknown, resent by the reconciler until the key window passed
// and then flagged for a person, every capture.
func TestEmptySuccessSettles(t *testing.T) {
	keyHeader := idem.WithKeyHeader("Klarna-Idempotency-Key", idem.KeyBare)
	for _, tt := range []struct {
		name, path string
		status     int
		id         string
	}{
		{"201 Created: the capture named by its Location", "/captures", http.StatusCreated, "4ba29b50-be7b-44f5-a492-113e6a865e22"},
		{"204 No Content", "/cancel", http.StatusNoContent, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := newKlarnaOM(t, 0)
			c := clientFor(t, k.srv, idemtest.NewClock(epoch), keyHeader)
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: k.srv.URL + "/ordermanagement/v1/orders/o1" + tt.path, Body: chargeBody})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, tt.id, res.ResourceID)
			require.Equal(t, tt.status, res.StatusCode)
			k.requireEffects(t, 1, 0)
		})
	}
	// A result query's 204 is a search that found nothing: "not found"
	// is not "never happened", nor is it a success.
	t.Run("a result query's 204 settles nothing", func(t *testing.T) {
		k := newKlarnaOM(t, 1)
		c := clientFor(t, k.srv, idemtest.NewClock(epoch), keyHeader,
			idem.WithResultEndpoint("/ordermanagement/v1/orders/o1/captures?reference={key}"))
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: k.srv.URL + "/ordermanagement/v1/orders/o1/captures", Body: chargeBody})
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "4ba29b50-be7b-44f5-a492-113e6a865e22", res.ResourceID)
		require.Equal(t, http.StatusCreated, res.StatusCode, "settled by the resend's 201, not the query's 204")
		k.requireEffects(t, 2, 1)
	})
}

// DecodeJSON reads an empty 201 or 204 to a submit as done, and nothing
// else that is empty: a 200 or 202 without a body, or any empty answer
// to a result query, proves nothing.
func TestDecodeJSONEmptyBody(t *testing.T) {
	loc := http.Header{"Location": {"https://api.example/v1/orders/o1/captures/cap_1"}}
	for _, tt := range []struct {
		name   string
		a      idem.Answer
		want   idem.Outcome
		proves bool
	}{
		{"201 with Location", idem.Answer{StatusCode: 201, Header: loc}, idem.Outcome{State: idem.StateSucceeded, ResourceID: "cap_1"}, true},
		{"201 with a relative Location", idem.Answer{StatusCode: 201, Header: http.Header{"Location": {"/orders/ord%2F1"}}},
			idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord/1"}, true},
		{"201 with a Location ending in a slash", idem.Answer{StatusCode: 201, Header: http.Header{"Location": {"/orders/ord_1/"}}},
			idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		{"201 without Location", idem.Answer{StatusCode: 201, Body: []byte(" \r\n")}, idem.Outcome{State: idem.StateSucceeded}, true},
		{"201 with a Location that is no URL", idem.Answer{StatusCode: 201, Header: http.Header{"Location": {"::"}}}, idem.Outcome{State: idem.StateSucceeded}, true},
		{"204", idem.Answer{StatusCode: 204}, idem.Outcome{State: idem.StateSucceeded}, true},
		{"200", idem.Answer{StatusCode: 200, Header: loc}, idem.Outcome{}, false},
		{"202", idem.Answer{StatusCode: 202, Header: loc}, idem.Outcome{}, false},
		{"201 to a result query", idem.Answer{StatusCode: 201, Header: loc, Query: true}, idem.Outcome{}, false},
		{"204 to a result query", idem.Answer{StatusCode: 204, Query: true}, idem.Outcome{}, false},
		{"201 with a body that proves nothing", idem.Answer{StatusCode: 201, Header: loc, Body: []byte(`{}`)}, idem.Outcome{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.a.Key = "k"
			got, err := idem.DecodeJSON(&tt.a)
			if !tt.proves {
				require.Errorf(t, err, "DecodeJSON = %+v", got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
