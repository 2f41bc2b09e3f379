package idem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestUnsendableRequestNeverJournaled: a request net/http would refuse on
// every attempt, or send other than as journaled, is refused by Prepare
// with an error naming what to change. Journaled, it could never be sent:
// retried, then left unknown for ever, and a caller told "unknown" may
// make the payment again.
func TestUnsendableRequestNeverJournaled(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1"}`))
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	url := srv.URL + "/orders"
	hdr := func(name, value string) idem.Request {
		return idem.Request{URL: url, Header: http.Header{name: {value}}, Body: []byte(`{}`)}
	}
	tests := map[string]struct {
		req  idem.Request
		want string // what the message must name
	}{
		// Pinned: keys go in a header and a journal index.
		"key with CRLF":           {idem.Request{URL: url, Key: "k\r\nX-Evil: 1"}, "key"},
		"key not UTF-8":           {idem.Request{URL: url, Key: "k\xff"}, "key"},
		"key trailing space":      {idem.Request{URL: url, Key: "k "}, "key"},
		"key past 255 bytes":      {idem.Request{URL: url, Key: strings.Repeat("k", 256)}, "key"},
		"scope with a NUL":        {idem.Request{URL: url, Scope: "a\x00b"}, "scope"},
		"method with a comma":     {idem.Request{URL: url, Method: "POST,"}, "method"},
		"method not ASCII":        {idem.Request{URL: url, Method: "PÖST"}, "method"},
		"method with a NUL":       {idem.Request{URL: url, Method: "POST\x00"}, "method"},
		"port out of range":       {idem.Request{URL: "http://127.0.0.1:99999/orders"}, "port"},
		"port 0":                  {idem.Request{URL: "http://127.0.0.1:0/orders"}, "port"},
		"no host name":            {idem.Request{URL: "http://:8080/orders"}, "host"},
		"result URL port":         {idem.Request{URL: url, ResultURL: "http://127.0.0.1:70000/ops/k"}, "ResultURL"},
		"Host header":             {hdr("Host", "api.example.com"), "Host"},
		"Content-Length header":   {hdr("Content-Length", "2"), "Content-Length"},
		"Transfer-Encoding gzip":  {hdr("Transfer-Encoding", "gzip"), "Transfer-Encoding"},
		"Transfer-Encoding chunk": {hdr("transfer-encoding", "chunked"), "Transfer-Encoding"},
		"Connection upgrade":      {hdr("Connection", "upgrade"), "Connection"},
		"Upgrade":                 {hdr("Upgrade", "websocket"), "Upgrade"},
		"Keep-Alive":              {hdr("Keep-Alive", "timeout=5"), "Keep-Alive"},
		"Proxy-Connection":        {hdr("Proxy-Connection", "keep-alive"), "Proxy-Connection"},
		"TE":                      {hdr("TE", "gzip"), "Te"},
		"Trailer":                 {hdr("Trailer", "X-Checksum"), "Trailer"},
	}
	n := 0
	for name, tc := range tests {
		n++
		t.Run(name, func(t *testing.T) {
			if tc.req.Key == "" {
				tc.req.Key = fmt.Sprint("k", n)
			}
			_, err := c.Submit(t.Context(), tc.req)
			require.ErrorIs(t, err, idem.ErrInvalidRequest)
			require.NotErrorIs(t, err, idem.ErrUnknownOutcome)
			require.ErrorContains(t, err, tc.want)
		})
	}
	ops, err := c.List(t.Context(), idem.Filter{AllScopes: true})
	require.NoError(t, err)
	require.Empty(t, ops, "List() after refused requests")
	require.Zero(t, hits.Load(), "server hits after refused requests")
}

// TestCredentialInURLQueryNeverJournaled: an API key written into the URL's
// query string was journaled and shown by the operator tool; the request
// hook is where it belongs (TestHookCredentialInURLNotJournaledOrLogged).
func TestCredentialInURLQueryNeverJournaled(t *testing.T) {
	e := newEnv(t)
	for i, raw := range []string{
		e.srv.URL + "/orders?api_key=sk_live_PLANTED",
		e.srv.URL + "/orders?x=1&Access_Token=PLANTED",
		e.srv.URL + "/orders?client_secret=PLANTED",
		// Azure API Management takes a product's subscription key in
		// this query parameter as well as in Ocp-Apim-Subscription-Key
		// (learn.microsoft.com/azure/api-management/api-management-subscriptions).
		e.srv.URL + "/orders?subscription-key=PLANTED",
		// SigV4 query authentication with temporary credentials carries
		// the STS session token (AWS S3 API, sigv4-query-string-auth).
		e.srv.URL + "/orders?X-Amz-Date=20261205T000000Z&X-Amz-Security-Token=PLANTED",
		// Vonage's api_secret (developer.vonage.com, Authentication);
		// apilayer's access_key (currencylayer, ipstack).
		e.srv.URL + "/orders?api_secret=PLANTED",
		e.srv.URL + "/orders?access_key=PLANTED",
	} {
		_, err := e.client.Prepare(e.ctx, idem.Request{Key: fmt.Sprint("q", i), URL: raw})
		require.ErrorIs(t, err, idem.ErrSecretHeader, raw)
		require.NotErrorIs(t, err, idem.ErrUnknownOutcome)
		require.ErrorContains(t, err, "WithRequestHook")
		require.NotContains(t, err.Error(), "PLANTED")
	}
	_, err := e.client.Prepare(e.ctx, idem.Request{Key: "r", URL: e.srv.URL + "/orders", ResultURL: e.srv.URL + "/operations/r?apikey=PLANTED"})
	require.ErrorIs(t, err, idem.ErrSecretHeader)
	ops, err := e.client.List(e.ctx, idem.Filter{})
	require.NoError(t, err)
	require.Empty(t, ops, "List() after refused requests")
}

// TestHeaderSpelledTwiceRefused: one header under two spellings of its
// name was merged in map order, which varies: the same Request prepared
// again got "key already used with a different request" about one time
// in five, and a caller told that may use a new key, and pay twice.
func TestHeaderSpelledTwiceRefused(t *testing.T) {
	e := newEnv(t)
	r := idem.Request{Key: "spelt-twice", URL: e.srv.URL + "/orders", Header: http.Header{"x-note": {"1"}, "X-Note": {"2"}}, Body: []byte(`{}`)}
	for range 20 { // map order: one try in five or so merged the other way
		_, err := e.client.Prepare(e.ctx, r)
		require.ErrorIs(t, err, idem.ErrInvalidRequest)
		require.ErrorContains(t, err, "X-Note")
	}
}
