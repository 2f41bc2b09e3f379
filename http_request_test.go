package idem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func TestRequestFromHTTP(t *testing.T) {
	t.Run("method, URL, headers, body, key", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPut, "https://api.example.com/v1/orders/o1?x=1", strings.NewReader(`{"a":1}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "draft-9")
		r.Header.Set("Content-Length", "7")
		req, err := idem.RequestFromHTTP(r)
		require.NoError(t, err)
		require.Equal(t, http.MethodPut, req.Method)
		require.Equal(t, "https://api.example.com/v1/orders/o1?x=1", req.URL)
		require.Equal(t, "draft-9", req.Key)
		require.Equal(t, http.Header{"Content-Type": {"application/json"}}, req.Header)
		require.Equal(t, `{"a":1}`, string(req.Body))
	})
	t.Run("credentials refused", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer sk_live_x")
		_, err := idem.RequestFromHTTP(r)
		require.ErrorIs(t, err, idem.ErrSecretHeader)
		require.NotContains(t, err.Error(), "sk_live_x")
	})
	t.Run("body over the limit", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/orders", strings.NewReader(strings.Repeat("x", idem.MaxBodyBytes+1)))
		_, err := idem.RequestFromHTTP(r)
		require.ErrorIs(t, err, idem.ErrInvalidRequest)
	})
	// net/http would refuse to send a body of another length than its
	// ContentLength, a Host override or trailers are not journaled: each
	// would have become an operation other than the caller's.
	t.Run("not what it would send", func(t *testing.T) {
		short := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/orders", strings.NewReader(`{"a":1}`))
		short.ContentLength = 70
		long := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/orders", strings.NewReader(`{"a":1}`))
		long.ContentLength = 3
		host := httptest.NewRequest(http.MethodPost, "https://10.0.0.7/v1/orders", nil)
		host.Host = "api.example.com"
		trailer := httptest.NewRequest(http.MethodPost, "https://api.example.com/v1/orders", strings.NewReader(`{"a":1}`))
		trailer.Trailer = http.Header{"X-Checksum": {"abc"}}
		for name, tc := range map[string]struct {
			r    *http.Request
			want string
		}{
			"body shorter than ContentLength": {short, "ContentLength"},
			"body longer than ContentLength":  {long, "ContentLength"},
			"Host other than the URL's":       {host, "Host"},
			"trailers":                        {trailer, "Trailer"},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := idem.RequestFromHTTP(tc.r)
				require.ErrorIs(t, err, idem.ErrInvalidRequest)
				require.ErrorContains(t, err, tc.want)
			})
		}
	})
	t.Run("nil", func(t *testing.T) {
		_, err := idem.RequestFromHTTP(nil)
		require.ErrorIs(t, err, idem.ErrInvalidRequest)
	})
	t.Run("submitted as it came", func(t *testing.T) {
		e := newEnv(t)
		r := httptest.NewRequest(http.MethodPost, e.srv.URL+"/orders", strings.NewReader(`{"amount":5}`))
		r.Header.Set("Idempotency-Key", "from-http")
		req, err := idem.RequestFromHTTP(r)
		require.NoError(t, err)
		res, err := e.client.Submit(e.ctx, req)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Len(t, e.submits("from-http"), 1)
	})
}

func TestDecodeBody(t *testing.T) {
	type order struct {
		ID     string `json:"resourceId"`
		Amount int    `json:"amount"`
	}
	got, err := idem.DecodeBody[order](&idem.Result{Body: []byte(`{"resourceId":"ord_1","amount":5}`)})
	require.NoError(t, err)
	require.Equal(t, order{ID: "ord_1", Amount: 5}, got)
	_, err = idem.DecodeBody[order](nil)
	require.Error(t, err)
	_, err = idem.DecodeBody[order](&idem.Result{Body: []byte(`{"resourceId":`)})
	require.ErrorContains(t, err, "DecodeBody")
}

func ExampleDecodeBody() {
	type order struct {
		ID string `json:"id"`
	}
	res := &idem.Result{State: idem.StateSucceeded, Body: []byte(`{"id":"ord_42","status":"paid"}`)}
	o, err := idem.DecodeBody[order](res)
	fmt.Println(o.ID, err)
	// Output: ord_42 <nil>
}

func ExampleRequestFromHTTP() {
	r, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/orders", strings.NewReader(`{"amount":1250}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "draft-17")
	req, err := idem.RequestFromHTTP(r)
	fmt.Println(req.Method, req.URL, req.Key, string(req.Body), err)
	// Output: POST https://api.example.com/v1/orders draft-17 {"amount":1250} <nil>
}
