package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// heldKeys is an API that takes the first request under a key (keyOf:
// a refund's token, an order's client order id) and refuses, in its own
// words (refusal), any later one under a key it holds, with status (200
// when 0). The first request is taken; then its answer is lost: the
// connection dropped (Submit resends), or, unavailable, a 503 from the
// client's own sidecar, which sends its copy (retryingSidecar).
type heldKeys struct {
	unavailable bool
	keyOf       func(body []byte) string
	refusal     func(key string) string
	status      int // the refusal's, 200 when 0

	mu       sync.Mutex
	keys     []string // the key of each request taken
	requests []string // each request's body
}

func (p *heldKeys) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	key := p.keyOf(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, string(b))
	w.Header().Set("Content-Type", "application/json")
	if slices.Contains(p.keys, key) {
		if p.status != 0 {
			w.WriteHeader(p.status)
		}
		_, _ = io.WriteString(w, p.refusal(key))
		return
	}
	p.keys = append(p.keys, key)
	if p.unavailable {
		podReset(w)
		return
	}
	dropConnection(w)
}

// jsonMember reads a request's key from its JSON body: the string at
// path, a member name an object deep; "" when there is none.
func jsonMember(path ...string) func(body []byte) string {
	return func(body []byte) string {
		var v any
		_ = json.Unmarshal(body, &v)
		for _, name := range path {
			obj, _ := v.(map[string]any)
			v = obj[name]
		}
		key, _ := v.(string)
		return key
	}
}

// formField reads a request's key from its form body: the field name.
func formField(name string) func(body []byte) string {
	return func(body []byte) string {
		form, _ := url.ParseQuery(string(body))
		return form.Get(name)
	}
}

// heldKeyClient is a client of srv with the key in the body, reading
// answers with decode (idem's default decoder when nil).
func heldKeyClient(t *testing.T, srv *httptest.Server, decode idem.Decoder) *idem.Client {
	t.Helper()
	opts := []idem.Option{idem.WithKeyInBody()}
	if decode != nil {
		opts = append(opts, idem.WithDecoder(decode))
	}
	return clientFor(t, srv, idemtest.NewClock(epoch), opts...)
}

// requireHeldKeyResendForAPerson: the refusal of a key it holds, to the
// resend after a lost answer, leaves the request taken for a person
// (ReviewRefusedAfterSend), one taken, every request the same bytes.
func requireHeldKeyResendForAPerson(t *testing.T, p *heldKeys, decode idem.Decoder, request func(base string) idem.Request) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	c := heldKeyClient(t, srv, decode)
	req := request(srv.URL)

	res, err := c.Submit(t.Context(), req)
	requireRefusedAfterSend(t, c, res, err, req.Key, "request taken under the key")

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, []string{req.Key}, p.keys, "requests taken")
	require.Equal(t, slices.Repeat([]string{string(req.Body)}, 4), p.requests, "requests")
}

// requireHeldKeyFirstAttemptForAPerson: the same refusal to idem's first
// attempt answers its sidecar's copy (Istio retries a 503 reset before
// headers): the request is ours, flagged for a person (ReviewKeyInUse),
// never failed nor resent.
func requireHeldKeyFirstAttemptForAPerson(t *testing.T, p *heldKeys, decode idem.Decoder, request func(base string) idem.Request, words string) {
	t.Helper()
	p.unavailable = true
	sidecar := retryingSidecar(t, p.serve)
	c := heldKeyClient(t, sidecar, decode)
	req := request(sidecar.URL)

	requireLeftForAPerson(t, c, req, words)

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, []string{req.Key}, p.keys, "requests taken")
	require.Equal(t, []string{string(req.Body), string(req.Body)}, p.requests, "copies: ours and the sidecar's, nothing resent")
}
