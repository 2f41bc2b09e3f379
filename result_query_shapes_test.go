package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Answers a result endpoint gives that prove nothing about the key: a
// search whose filter found nothing, or was ignored and lists another
// order; an empty or null object; a CDN's HTML page; a redirect to a
// login page; an object about another key (204 No Content is in
// TestEmptySuccessSettles); with the key in a header, one naming it in a
// shape the decoder cannot read. Each leaves the query
// inconclusive: the order (made by the first submit, whose answer was a
// gateway's 504) is settled by the resend's replayed 201, never by the
// query's answer, and never as the other order.
func TestResultQueryAnswersThatProveNothing(t *testing.T) {
	for _, tt := range []struct {
		name        string
		status      int
		contentType string
		location    string
		body        string
	}{
		{name: "empty list", status: 200, body: `{"object":"list","data":[],"has_more":false}`},
		{name: "a list the filter was not applied to", status: 200, body: `{"object":"list","data":[{"id":"ch_other","status":"succeeded"}]}`},
		{name: "bare array", status: 200, body: `[{"id":"ch_other"}]`},
		{name: "empty object", status: 200, body: `{}`},
		{name: "null", status: 200, body: `null`},
		{name: "another key's result", status: 200, body: `{"id":"ch_other","idempotency_key":"k2"}`},
		{name: "CDN HTML page", status: 200, contentType: "text/html", body: `<!doctype html><title>Just a moment...</title>`},
		{name: "CDN HTML 404", status: 404, contentType: "text/html", body: `<html><body>404 Not Found</body></html>`},
		{name: "redirect to a login page", status: 302, location: "/login?next=/operations/k"},
		// https://increase.com/documentation/idempotency-keys.md: "Each
		// list endpoint has an optional filter parameter idempotency_key";
		// it answers a list (https://increase.com/documentation/api/ach-transfers.md)
		// whose one transfer names the key. The order exists, but in a
		// shape DecodeJSON cannot read: with the key in a header, the
		// resend is safe and its replay settles it, not held unread.
		{name: "a list of one naming the key, unread", status: 200, body: `{"data":[{"account_id":"account_in71c4amph0vgo2qllky",` +
			`"amount":100,"currency":"USD","id":"ach_transfer_uoxatyh3lt5evrsdvo7q","idempotency_key":"k","status":"pending_approval",` +
			`"type":"ach_transfer"}],"next_cursor":null}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			posts, queries, orders := 0, 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				defer mu.Unlock()
				if r.Method == http.MethodGet {
					queries++
					if tt.location != "" {
						w.Header().Set("Location", tt.location)
					}
					if tt.contentType != "" {
						w.Header().Set("Content-Type", tt.contentType)
					}
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.body)
					return
				}
				posts++
				if posts == 1 {
					orders++
					w.WriteHeader(http.StatusGatewayTimeout)
					_, _ = io.WriteString(w, `{"message":"Endpoint request timed out"}`)
					return
				}
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, `{"id":"ch_1","status":"succeeded"}`)
			}))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint("/operations/{key}"))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/charges", Body: chargeBody})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "ch_1", res.ResourceID)
			require.Equal(t, http.StatusCreated, res.StatusCode, "settled by the query's answer")
			require.True(t, res.Replayed)
			require.NotContains(t, string(res.Body), "ch_other")
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 1, orders, "orders")
			require.Equal(t, 2, posts, "submits")
			require.Equal(t, 1, queries, "result queries")
		})
	}
}
