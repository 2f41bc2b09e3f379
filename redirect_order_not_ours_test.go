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

// redirectOrderBody is a create of an order whose client_order_id is the
// key, read with idem's own decoder (DecodeJSON), which reads any object
// with an "id" and no failing status as a resource made.
const redirectOrderBody = `{"client_order_id":"ord-9","product_id":"BTC-USD","side":"BUY","amount":"10.00","currency":"USD"}`

// redirectingFront answers every POST with status, Location and body, and
// counts the POSTs.
type redirectingFront struct {
	status int
	body   string

	mu    sync.Mutex
	posts []string
}

func (f *redirectingFront) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.posts = append(f.posts, string(b))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/o_held")
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.body)
}

func (f *redirectingFront) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.posts...)
}

func submitRedirected(t *testing.T, f *redirectingFront) (*idem.Client, *idem.Result, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
	res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/orders",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(redirectOrderBody)})
	return c, res, err
}

// requireLeftOpen requires a submit of body through f to have been left
// open, unknown and never failed, after the call's budget of sends, each
// of body's bytes.
func requireLeftOpen(t *testing.T, f *redirectingFront, body string, res *idem.Result, err error) {
	t.Helper()
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Empty(t, res.ResourceID)
	require.Len(t, f.sent(), idem.DefaultMaxAttempts, "sends: the call's budget, never settled")
	for _, b := range f.sent() {
		require.Equal(t, body, b, "every attempt the same bytes")
	}
}

// A server may answer a POST whose result "would be equivalent to a
// representation of an existing resource" with a 303 to that resource
// (RFC 9110 9.3.3, https://www.rfc-editor.org/rfc/rfc9110#section-9.3.3;
// https://github.com/AtomGraph/Processor/issues/28 weighs it for a POST
// that constructs an existing resource): here the order it holds under the
// client_order_id, placed by another request (another service's ETH sell
// under the same id). Answered 200 so, that order is flagged
// ReviewKeyInUse (TestCoinbaseCreateAnsweredWithAnotherRequestsHeldOrder);
// answered 303, it was settled succeeded as ours, and ours was never
// placed. It is flagged the same, sent once.
func TestRedirectToAnotherRequestsHeldOrderIsNotOurs(t *testing.T) {
	f := &redirectingFront{status: http.StatusSeeOther,
		body: `{"id":"o_held","client_order_id":"ord-9","product_id":"ETH-USD","side":"SELL","amount":"10.00","currency":"USD","status":"FILLED"}`}
	c, res, err := submitRedirected(t, f)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.ReviewKeyInUse, res.Review)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Empty(t, res.ResourceID, "the held order is not journaled as ours")
	op, lerr := c.Lookup(t.Context(), idem.DefaultScope, "ord-9")
	require.NoError(t, lerr)
	require.Equal(t, idem.ReviewKeyInUse, op.Review)
	require.Equal(t, []string{redirectOrderBody}, f.sent(), "sent once")

	// The order placed for this request, answered 303 so, is ours.
	f = &redirectingFront{status: http.StatusSeeOther,
		body: `{"id":"o_ours","client_order_id":"ord-9","product_id":"BTC-USD","side":"BUY","amount":"10.00","currency":"USD","status":"FILLED"}`}
	_, res, err = submitRedirected(t, f)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "o_ours", res.ResourceID)
	require.Len(t, f.sent(), 1)
}

// A front between the client and the API (an SSO or bot-check gateway)
// that answers a POST it will not pass 302 to its login or challenge, and
// keeps the request to send on afterwards, may give it back in the
// redirect's body. The key is in that body, and idem's decoder reads the
// gateway's flow "id" beside no status as a resource made: the order,
// never sent to the API, was settled succeeded with the gateway's id.
// Only a key at a key's member of the answer's resource, not one nested
// in a request it quotes, makes the redirect the API's answer for it; so
// is it for a short key at another member. The operation stays open,
// never failed.
func TestRedirectQuotingTheRequestSettlesNothing(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"a login gateway keeping the request", `{"id":"flow_8f2a","redirect_to":"https://sso.example.com/login?flow=flow_8f2a",` +
			`"request":{"method":"POST","path":"/orders","body":` + redirectOrderBody + `}}`},
		{"a challenge keeping the form", `{"id":"chk_51","challenge":"https://front.example.com/challenge/chk_51",` +
			`"form":{"client_order_id":"ord-9","product_id":"BTC-USD"}}`},
		{"another order naming the key at another member", `{"id":"o_other","client_order_id":"ord-8","note":"ord-9","status":"FILLED"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &redirectingFront{status: http.StatusFound, body: tc.body}
			_, res, err := submitRedirected(t, f)
			requireLeftOpen(t, f, redirectOrderBody, res, err)
		})
	}
}

// A redirect refuses nothing: one naming the key whose body idem's
// decoder reads as a declined order (status "DECLINED") leaves the
// operation open, never failed, where a "failed" would invite the order
// again under a new key. TestRedirectBodyNotOursSettlesNothing's failure
// is one its PayU decoder reads as an error, so could not tell.
func TestRedirectReadAsFailedIsNeverFailed(t *testing.T) {
	f := &redirectingFront{status: http.StatusFound,
		body: `{"id":"o_ours","client_order_id":"ord-9","product_id":"BTC-USD","side":"BUY","status":"DECLINED"}`}
	_, res, err := submitRedirected(t, f)
	requireLeftOpen(t, f, redirectOrderBody, res, err)
}

// A front that answers a POST 302 with the request itself as its body
// (a load balancer or gateway handing the request back for the client to
// send elsewhere; modelled) names the key where the request does. Where
// the client chooses the order's id (here the key, at "id"), idem's
// decoder read the echo as the order made: settled succeeded, the order
// never sent to the API. The request's own bytes are no answer, nor are
// they re-encoded: a front that parses the posted JSON and writes it back
// (modelled on what encoders do to a value they re-encode: Go's
// encoding/json sorts a map's members, writes "&" as \u0026 and a float64
// 10.00 as 10; PHP's json_encode with JSON_PRETTY_PRINT indents, writes
// "/" as \/ and, with JSON_PRESERVE_ZERO_FRACTION, 10.0) hands back the
// same request in other bytes. Compared byte for byte, those were taken
// as the order's answer and settled succeeded after one send. So is a
// form whose names are bracketed, which the front's parser nests: PHP's
// "To get your <form> result sent as an array to your PHP script you
// name the <input>, <select> or <textarea> elements like this: <input
// name="MyArray[]" />" (php.net/manual/en/faq.html.php#faq.html.arrays),
// order[id] a member of $_POST["order"]; Express's urlencoded parser,
// whose "extended" syntax "allows for rich objects and arrays to be
// encoded into the URL-encoded format" (expressjs.com body-parser, qs).
// Written back with json_encode, compared parameter by parameter, each
// settled succeeded after one send.
func TestRedirectEchoingTheRequestSettlesNothing(t *testing.T) {
	const body = `{"id":"ord-9","product_id":"BTC-USD","side":"BUY","amount":10.00,"currency":"USD","note":"a&b/c"}`
	const form = "id=ord-9&product_id=BTC-USD&side=BUY&amount=10.00"
	const bracketed = "id=ord-9&product_id=BTC-USD&amount=10.00&meta[note]=a%26b&tags[]=x&tags[]=y&items[0][ref]=l1&items[1][ref]=l2"
	const numbered = "id=ord-9&items[1][ref]=l1&items[1][qty]=2&items[2][ref]=l2&items[2][qty]=1"
	for _, tc := range []struct{ name, body, echo string }{
		{"the request's bytes", body, body},
		{"the request's bytes, a newline after", body, body + "\n"},
		{"re-encoded by Go's encoding/json", body, `{"amount":10,"currency":"USD","id":"ord-9","note":"a\u0026b/c","product_id":"BTC-USD","side":"BUY"}`},
		{"re-encoded by PHP's json_encode, pretty", body, "{\n    \"id\": \"ord-9\",\n    \"product_id\": \"BTC-USD\",\n    \"side\": \"BUY\",\n" +
			"    \"amount\": 10.0,\n    \"currency\": \"USD\",\n    \"note\": \"a&b\\/c\"\n}"},
		{"a form written back as JSON", form, `{"amount":"10.00","id":"ord-9","product_id":"BTC-USD","side":"BUY"}`},
		{"a bracketed form, json_encode($_POST)", bracketed,
			`{"id":"ord-9","product_id":"BTC-USD","amount":"10.00","meta":{"note":"a&b"},"tags":["x","y"],"items":[{"ref":"l1"},{"ref":"l2"}]}`},
		{"a form numbered from 1, json_encode($_POST)", numbered,
			`{"id":"ord-9","items":{"1":{"ref":"l1","qty":"2"},"2":{"ref":"l2","qty":"1"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &redirectingFront{status: http.StatusFound, body: tc.echo}
			srv := httptest.NewServer(http.HandlerFunc(f.serve))
			t.Cleanup(srv.Close)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody())
			ct := "application/json"
			if !strings.HasPrefix(tc.body, "{") {
				ct = "application/x-www-form-urlencoded"
			}
			res, err := c.Submit(t.Context(), idem.Request{Key: "ord-9", URL: srv.URL + "/orders",
				Header: http.Header{"Content-Type": {ct}}, Body: []byte(tc.body)})
			requireLeftOpen(t, f, tc.body, res, err)
		})
	}
}
