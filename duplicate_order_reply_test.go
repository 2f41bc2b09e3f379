package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// wpgOrders models WPG's order service behind a gateway, its idempotency
// store out of reach: "If we're unable to check an Idempotency Key, we
// will process the request anyway" (developer.worldpay.com/docs/wpg/
// idempotency). Each order's orderCode must not have been used before
// (WPG's orderCode, as TokenEx's WPG mapping documents it); an order
// under a code it holds is refused with an error in its 200 reply,
// "Duplicate Order". The card of an order is authorised, or refused
// when its number is declineCard; the gateway in front answers the
// first submit 504 after WPG authorised it when lostFirst is set.
type wpgOrders struct {
	mu             sync.Mutex
	lostFirst      bool
	resetFirst     bool            // the first authorisation's connection resets (503) behind a retrying sidecar
	held           map[string]bool // orderCodes WPG holds
	authorisations int
	refusals       int
	keys           []string // the Idempotency-Key of each submit
}

const declineCard = "4000000000000002"

var (
	orderCodeAttr = regexp.MustCompile(`<order orderCode="([^"]+)"`)
	cardNumber    = regexp.MustCompile(`<cardNumber>([0-9]+)</cardNumber>`)
)

func (w *wpgOrders) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	code := orderCodeAttr.FindSubmatch(body)
	if code == nil {
		http.Error(rw, "no order", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	w.keys = append(w.keys, r.Header.Get("Idempotency-Key"))
	first := len(w.keys) == 1
	reply := wpg(`<error code="5"><![CDATA[Duplicate Order]]></error>`)
	switch card := cardNumber.FindSubmatch(body); {
	case w.held[string(code[1])]:
	case card != nil && string(card[1]) == declineCard:
		w.held[string(code[1])] = true
		w.refusals++
		reply = wpg(`<orderStatus orderCode="` + string(code[1]) + `"><payment><paymentMethod>VISA-SSL</paymentMethod>` +
			`<lastEvent>REFUSED</lastEvent></payment></orderStatus>`)
	default:
		w.held[string(code[1])] = true
		w.authorisations++
		reply = wpg(`<orderStatus orderCode="` + string(code[1]) + `"><payment><paymentMethod>VISA-SSL</paymentMethod>` +
			`<amount value="1000" currencyCode="EUR" exponent="2" debitCreditIndicator="credit"/><lastEvent>AUTHORISED</lastEvent></payment></orderStatus>`)
		switch {
		case first && w.lostFirst:
			reply = shape{status: http.StatusGatewayTimeout, body: `<html><body><h1>504 Gateway Time-out</h1></body></html>`}
		case first && w.resetFirst:
			reply = shape{status: http.StatusServiceUnavailable,
				body: `upstream connect error or disconnect/reset before headers. reset reason: connection termination`}
		}
	}
	w.mu.Unlock()
	for name, vals := range reply.header {
		rw.Header()[name] = vals
	}
	rw.WriteHeader(reply.status)
	_, _ = io.WriteString(rw, reply.body)
}

// submit sends one WPG order for card under orderCode "order-7" with key
// "k" in the Idempotency-Key header, through a client with the default
// settings and a decoder that reads WPG's errors as the order's failure.
func (w *wpgOrders) submit(t *testing.T, card string) (*idem.Client, *idem.Result, error) {
	t.Helper()
	var srv *httptest.Server
	if w.resetFirst {
		srv = retryingSidecar(t, w.serve)
	} else {
		srv = httptest.NewServer(http.HandlerFunc(w.serve))
		t.Cleanup(srv.Close)
	}
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Idempotency-Key", idem.KeyBare), idem.WithDecoder(decodeWPG))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/jsp/merchant/xml/paymentService.jsp",
		Header: http.Header{"Content-Type": {"text/xml"}},
		Body: []byte(`<?xml version="1.0" encoding="UTF-8"?><paymentService version="1.4" merchantCode="MYMERCHANT"><submit>` +
			`<order orderCode="order-7"><description>order 7</description><amount currencyCode="EUR" exponent="2" value="1000"/>` +
			`<paymentDetails><CARD-SSL><cardNumber>` + card + `</cardNumber></CARD-SSL></paymentDetails></order></submit></paymentService>`)})
	return c, res, err
}

// requireSubmits asserts the authorisations and refusals WPG made, and
// that each of n submits carried key "k".
func (w *wpgOrders) requireSubmits(t *testing.T, authorisations, refusals, n int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, authorisations, w.authorisations, "authorisations")
	require.Equal(t, refusals, w.refusals, "refusals")
	require.Len(t, w.keys, n, "submits")
	for i, k := range w.keys {
		require.Equalf(t, "k", k, "submit %d: Idempotency-Key", i+1)
	}
}

// WPG's 200 reply refusing an orderCode it holds, "Duplicate Order", to
// the resend after a gateway's 504 that followed the authorisation, its
// idempotency store out of reach so that the key was not checked. With
// the key in a header, idem weighed the same words only as the 4xx's,
// and a decoder that reads WPG's errors as failures (as ActiveMerchant's
// Worldpay gateway does) had the call end ErrFailed for an authorised
// order: the shop charges again under a new orderCode. The order under
// the code may be ours, as a 4xx refusal after such a send may be: never
// failed; the resends' refusals leave it for a person. To a first
// attempt too (TestDuplicateOrderReplyToAFirstAttemptBehindAMesh): idem
// cannot tell a mesh's copy of it from an earlier order's code.
func TestDuplicateOrderReplyToAResendIsNoFailure(t *testing.T) {
	w := &wpgOrders{lostFirst: true, held: map[string]bool{}}
	c, res, err := w.submit(t, "4444333322221111")
	requireRefusedAfterSend(t, c, res, err, "k", "authorised order")
	w.requireSubmits(t, 1, 0, 4)

	t.Run("a decline to a first attempt is failed", func(t *testing.T) {
		w := &wpgOrders{held: map[string]bool{}}
		_, res, err := w.submit(t, declineCard)
		requireOutcome(t, res, err, idem.StateFailed, []error{idem.ErrFailed}, "order-7", "")
		w.requireSubmits(t, 0, 1, 1)
	})
}

// WPG behind a sidecar that retries an upstream 503 whatever the method
// (Istio's default retriable_status_codes 503; Envoy's retry_on 5xx or
// reset does the same for a reset), its idempotency store out of reach:
// "If we're unable to check an Idempotency Key, we will process the
// request anyway" (developer.worldpay.com/docs/wpg/idempotency). The
// first copy authorises the order and the pod's connection resets before
// its answer is out; the sidecar sends the same bytes and key again, and
// WPG, which cannot check the key, refuses the orderCode it now holds,
// "Duplicate Order", 200 OK: the one answer idem hears, to its first
// attempt. Read as the order's failure it invited the same order again
// under a new orderCode, a second charge. The key in the body is flagged
// so (TestDuplicateOrderToAFirstAttemptBehindAMesh); so is the key in a
// header now: for a person, never ErrFailed, nothing sent again.
func TestDuplicateOrderReplyToAFirstAttemptBehindAMesh(t *testing.T) {
	w := &wpgOrders{resetFirst: true, held: map[string]bool{}}
	c, res, err := w.submit(t, "4444333322221111")
	requireForeignKey(t, res, err)
	require.Equal(t, 1, res.Attempts)
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.True(t, rec.Open())
	require.Len(t, rec.Attempts, 1)
	require.Contains(t, rec.Attempts[0].Err, "Duplicate Order", "the server's words, for the person deciding")
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "still for a person: %+v", sum)
	w.requireSubmits(t, 1, 0, 2)
}
