package idem_test

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// TestKeyInBodyMustBeInTheBody: with WithKeyInBody idem sends no key
// header, so a body without the key reaches the server with no key at
// all, and every retry may execute again: a charge per attempt. Prepare
// refuses such a body; the key written as JSON or form encoding writes it
// is found.
func TestKeyInBodyMustBeInTheBody(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithKeyInBody()))
	_, err := e.client.Prepare(e.ctx, idem.Request{Key: "draft-7", URL: e.srv.URL + "/orders", Body: []byte(`{"amount":5}`)})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "WithKeyInBody")
	ops, err := e.client.List(e.ctx, idem.Filter{})
	require.NoError(t, err)
	require.Empty(t, ops, "List() after a refused request")

	const odd = `a<b>&c/"d`
	jsonBody, err := json.Marshal(map[string]any{"idempotency_key": odd, "amount": 5}) // escapes <, >, & and "
	require.NoError(t, err)
	for name, r := range map[string]idem.Request{
		"plain":        {Key: "draft-8", Body: []byte(`{"idempotency_key":"draft-8","amount":5}`)},
		"JSON-escaped": {Key: odd, Body: jsonBody},
		"form":         {Key: odd + "2", Body: []byte("amount=5&idempotency_key=" + url.QueryEscape(odd+"2")), Header: map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}},
	} {
		t.Run(name, func(t *testing.T) {
			r.URL = e.srv.URL + "/orders"
			_, err := e.client.Prepare(e.ctx, r)
			require.NoError(t, err)
		})
	}
}
