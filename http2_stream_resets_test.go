package idem_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Payment APIs answer over TLS with HTTP/2 (Stripe, Adyen, PayPal), and
// idem's default transport negotiates it (ForceAttemptHTTP2), so a lost
// answer comes as an HTTP/2 stream or connection error (RFC 9113), not an
// HTTP/1 connection reset: RST_STREAM after the handler ran, GOAWAY with
// streams in flight, a stream refused, a body cut after its headers. The
// trace that tells "never sent" from "maybe sent" must read each one
// right, and net/http's own retries on HTTP/2 (shouldRetryRequest) must
// resend only the same key and bytes.

// h2Copy is one request that reached the orders service.
type h2Copy struct {
	key   string
	body  string
	proto int
}

// h2Orders is an orders service that de-duplicates by key as Stripe does
// (docs.stripe.com/api/idempotent_requests): a key whose request still
// runs answers 409, a finished one replays its stored answer marked
// Idempotent-Replayed. With keyInBody the key is the body's
// client_order_id, and a copy gets the order placed under it, as
// Coinbase Advanced Trade answers a repeated client_order_id.
type h2Orders struct {
	keyInBody bool
	// fault, if set, runs on a key's first copy once its order is
	// committed (before, for commitAfterCancel): what the server does to
	// the stream.
	fault func(w http.ResponseWriter, r *http.Request)
	// commitAfterCancel: the first copy commits only once the client has
	// given up on it (RST_STREAM CANCEL).
	commitAfterCancel bool

	mu       sync.Mutex
	orders   map[string]int
	stored   map[string]string
	inFlight map[string]bool
	copies   []h2Copy
}

func newH2Orders() *h2Orders {
	return &h2Orders{orders: map[string]int{}, stored: map[string]string{}, inFlight: map[string]bool{}}
}

func (o *h2Orders) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client reset the stream before it was whole
	}
	key := r.Header.Get("Idempotency-Key")
	if o.keyInBody {
		var b struct {
			ClientOrderID string `json:"client_order_id"`
		}
		_ = json.Unmarshal(body, &b)
		key = b.ClientOrderID
	}
	o.mu.Lock()
	o.copies = append(o.copies, h2Copy{key: key, body: string(body), proto: r.ProtoMajor})
	first := o.stored[key] == "" && !o.inFlight[key]
	switch {
	case o.stored[key] != "":
		answer := o.stored[key]
		o.mu.Unlock()
		if !o.keyInBody {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, answer)
		return
	case o.inFlight[key]:
		o.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":{"type":"idempotency_error","message":"There is currently another in-progress request using this Idempotent Key `+
			`(that probably means you submitted twice, and the other request is still going through). Please try again later."}}`)
		return
	}
	o.inFlight[key] = true
	if !o.commitAfterCancel {
		o.commitLocked(key)
	}
	o.mu.Unlock()
	if first && o.commitAfterCancel {
		<-r.Context().Done()
		o.mu.Lock()
		o.commitLocked(key)
		o.mu.Unlock()
		return
	}
	if first && o.fault != nil {
		o.fault(w, r)
	}
	o.mu.Lock()
	answer := o.stored[key]
	o.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, answer)
}

func (o *h2Orders) commitLocked(key string) {
	o.orders[key]++
	o.stored[key] = fmt.Sprintf(`{"id":"ord_%s","status":"succeeded","amount":100}`, key)
	o.inFlight[key] = false
}

// require checks that every key in keys has one order, and that every
// copy that reached the service came over HTTP/2 with its key's bytes.
func (o *h2Orders) require(t *testing.T, bodies map[string]string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for key, body := range bodies {
		require.Equal(t, 1, o.orders[key], "orders under %q", key)
		n := 0
		for _, c := range o.copies {
			if c.key == key {
				n++
				require.Equal(t, body, c.body, "bytes of a copy under %q", key)
			}
		}
		require.NotZero(t, n, "copies under %q", key)
	}
	for _, c := range o.copies {
		require.Equal(t, 2, c.proto, "a copy came over HTTP/%d", c.proto)
		_, ours := bodies[c.key]
		require.True(t, ours, "a copy under a key no call sent: %q", c.key)
	}
}

// startH2 serves o over TLS with HTTP/2 on 127.0.0.1, configured by
// setup before it starts, and returns it with startTrusted's client.
func startH2(t *testing.T, o *h2Orders, setup func(*http.Server)) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(o.serve))
	srv.EnableHTTP2 = true
	if setup != nil {
		setup(srv.Config)
	}
	return srv, startTrusted(t, srv)
}

// startTrusted starts srv over TLS and returns a client that trusts it
// and is otherwise idem's default: http.DefaultTransport cloned, which
// negotiates HTTP/2 (ForceAttemptHTTP2).
func startTrusted(t *testing.T, srv *httptest.Server) *http.Client {
	t.Helper()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	return &http.Client{Transport: tr}
}

func h2Body(key string, keyInBody bool) []byte {
	if keyInBody {
		return fmt.Appendf(nil, `{"client_order_id":%q,"amount":100}`, key)
	}
	return []byte(`{"amount":100}`)
}

// The server's side of a stream lost after the order was committed, or
// committed after the client gave up on it. Each ends with one order,
// found by a resend under the same key, and never ErrFailed.
func TestHTTP2StreamLostAfterTheOrder(t *testing.T) {
	abort := func(http.ResponseWriter, *http.Request) {
		// Go's server resets the stream, INTERNAL_ERROR (RFC 9113
		// 8.1: a server that cannot finish a response), as an
		// upstream's crash behind an HTTP/2 proxy does.
		panic(http.ErrAbortHandler)
	}
	for _, tc := range []struct {
		name              string
		keyInBody         bool
		fault             func(http.ResponseWriter, *http.Request)
		commitAfterCancel bool
		opts              []idem.Option
	}{
		{name: "RST_STREAM INTERNAL_ERROR after the commit", fault: abort},
		{name: "RST_STREAM INTERNAL_ERROR after the commit, key in the body", keyInBody: true, fault: abort},
		{name: "headers sent, body cut", fault: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"id":"ord_`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{name: "headers sent, body cut, key in the body", keyInBody: true, fault: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"id":"ord_`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		// The attempt's timeout ends the stream (RST_STREAM CANCEL);
		// the order commits after it, as a handler that does not watch
		// its request's context does. A second, not the default 10,
		// keeps the test short.
		{name: "attempt timeout, RST_STREAM CANCEL, then the commit", commitAfterCancel: true, opts: []idem.Option{idem.WithAttemptTimeout(time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newH2Orders()
			o.keyInBody, o.fault, o.commitAfterCancel = tc.keyInBody, tc.fault, tc.commitAfterCancel
			srv, hc := startH2(t, o, nil)
			opts := []idem.Option{idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch))}
			if tc.keyInBody {
				opts = append(opts, idem.WithKeyInBody())
			}
			c := journaledClient(t, append(opts, tc.opts...)...)
			const key = "k1"
			body := h2Body(key, tc.keyInBody)
			res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/v1/orders", Body: body})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "ord_"+key, res.ResourceID)
			require.GreaterOrEqual(t, res.Attempts, 2, "the lost answer, then the resend")
			o.require(t, map[string]string{key: string(body)})
		})
	}
}

// A server draining a connection (a graceful restart, a load balancer
// taking it out) sends GOAWAY with the last stream it took (RFC 9113
// 6.8): those run to their end, any above it were never processed and
// net/http resends them on a new connection. Go's server drains so on an
// answer's Connection: close, here while other calls' streams are in
// flight. Every call ends with its one order.
func TestHTTP2GoAwayWithStreamsInFlight(t *testing.T) {
	o := newH2Orders()
	const n = 6
	var (
		mu      sync.Mutex
		arrived int
		drained = make(chan struct{})
	)
	o.fault = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "warm" {
			return
		}
		mu.Lock()
		arrived++
		closer := arrived == n/2
		mu.Unlock()
		if closer {
			w.Header().Set("Connection", "close")
			close(drained)
			return
		}
		// In flight when the GOAWAY goes out, if it came before it.
		select {
		case <-drained:
		case <-r.Context().Done():
		}
	}
	srv, hc := startH2(t, o, nil)
	c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
	warm, err := c.Submit(t.Context(), idem.Request{Key: "warm", URL: srv.URL + "/v1/orders", Body: h2Body("warm", false)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, warm.State)

	bodies := submitEach(t, c, srv.URL, "g", n)
	bodies["warm"] = string(h2Body("warm", false))
	o.require(t, bodies)
}

// submitEach submits n orders at once, keys prefix0 and on, and requires
// each to succeed with its own order; it returns each key's body.
func submitEach(t *testing.T, c *idem.Client, url, prefix string, n int) map[string]string {
	t.Helper()
	bodies := map[string]string{}
	errs := make(chan error, n)
	for i := range n {
		key := fmt.Sprintf("%s%d", prefix, i)
		bodies[key] = string(h2Body(key, false))
		go func() {
			res, err := c.Submit(context.Background(), idem.Request{Key: key, URL: url + "/v1/orders", Body: h2Body(key, false)})
			if err == nil && (res.State != idem.StateSucceeded || res.ResourceID != "ord_"+key) {
				err = fmt.Errorf("%s: %s %q", key, res.State, res.ResourceID)
			}
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	return bodies
}

// A server's SETTINGS_MAX_CONCURRENT_STREAMS of 1: streams a client opens
// before it has the setting are refused (REFUSED_STREAM, or Go's server's
// PROTOCOL_ERROR once it is acknowledged, golang/go#47635), never
// processed (RFC 9113 8.7). On first contact with the endpoint, as here,
// idem stops net/http's resend of them (the trace cannot tell either
// from a reset after the handler ran) and resends them itself, under
// the same key; once a 2xx has come, net/http resends them. Concurrent
// calls on a new connection each end with one order.
func TestHTTP2MaxConcurrentStreams(t *testing.T) {
	o := newH2Orders()
	srv, hc := startH2(t, o, func(s *http.Server) { s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1} })
	c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
	o.require(t, submitEach(t, c, srv.URL, "m", 8))
}

// h2Answer is what rawH2 does with one stream: refuse it (RST_STREAM
// REFUSED_STREAM, RFC 9113 8.7: never processed), or answer it.
type h2Answer struct {
	refuse bool
	// protocolError: reset the stream PROTOCOL_ERROR once its request
	// is taken (a processed stream's reset, which says nothing of
	// whether it ran: RFC 9113 8.7).
	protocolError bool
	// interim, if set, is the status of an informational response (103
	// Early Hints, RFC 8297) sent on the stream once its request is
	// taken, before what follows (a reset, or the answer); sent
	// interims times if that is more than once.
	interim  string
	interims int
	// early: answer on the request's HEADERS, before its body (RFC 9113
	// 8.1 lets a server answer before the request ends), as a rate
	// limiter in front does (nginx's limit_req reads no body). rawH2
	// grants no flow-control window past the first 64 KiB.
	early  bool
	status string
	header [][2]string // lower-case names
	body   string
}

// rawH2 is an HTTP/2 server written frame by frame (RFC 9113 4, 6, and
// RFC 7541's literal and static-table forms), to refuse a stream with
// REFUSED_STREAM when a test says so: Go's server does that only in a
// race (a stream past MAX_CONCURRENT_STREAMS before its SETTINGS are
// acknowledged), while proxies in front of payment APIs do it whenever
// their stream limit is reached (nginx's http2_max_concurrent_streams,
// Envoy's max_concurrent_streams). It answers each stream with the next
// of answers, and keeps each stream's request body and header block.
type rawH2 struct {
	answers []h2Answer
	// answer, if set, is what the server does with a stream instead,
	// given its request body (empty: a GET, a result query).
	answer func(body string) h2Answer
	mu     sync.Mutex
	bodies []string
	blocks [][]byte
	// ended: each stream's HEADERS frame carried END_STREAM.
	ended []bool
}

func startRawH2(t *testing.T, answers ...h2Answer) (*rawH2, string, *http.Client) {
	t.Helper()
	s := &rawH2{answers: answers}
	url, hc := s.start(t)
	return s, url, hc
}

// start serves s over TLS on 127.0.0.1 and returns its URL and
// startTrusted's client.
func (s *rawH2) start(t *testing.T) (string, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{NextProtos: []string{"h2"}}
	srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
		"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { s.serve(c) },
	}
	hc := startTrusted(t, srv)
	return srv.URL, hc
}

func (s *rawH2) streams() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

func (s *rawH2) endedOnHeaders() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ended)
}

// carried reports, for each stream, whether its header block holds key
// as a field value. rawH2's SETTINGS_HEADER_TABLE_SIZE of 0 (RFC 9113
// 6.5.2) leaves the client's encoder no dynamic table to index a field
// in, so each block carries the value itself (RFC 7541 6.2), and a key
// whose Huffman code is no shorter than it ("k1": 7 and 5 bits, two
// octets either way) is sent as its own octets (RFC 7541 5.2: the
// encoder picks).
func (s *rawH2) carried(key string) []bool {
	lit := append([]byte{byte(len(key))}, key...)
	s.mu.Lock()
	defer s.mu.Unlock()
	has := make([]bool, len(s.blocks))
	for i, b := range s.blocks {
		has[i] = bytes.Contains(b, lit)
	}
	return has
}

const (
	h2Data, h2Headers, h2RSTStream, h2Settings = 0x0, 0x1, 0x3, 0x4
	h2SettingsHeaderTableSize                  = 0x1
	h2EndStream, h2Ack, h2EndHeaders, h2Padded = 0x1, 0x1, 0x4, 0x8
	h2ProtocolError, h2RefusedStream           = 0x1, 0x7
)

func (s *rawH2) serve(c net.Conn) {
	defer c.Close()
	preface := make([]byte, len(http2Preface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2Preface {
		return
	}
	write := func(typ, flags byte, stream uint32, payload []byte) error {
		hdr := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags}
		_, err := c.Write(append(binary.BigEndian.AppendUint32(hdr, stream), payload...))
		return err
	}
	// A header table of 0: each request's header block carries its
	// fields' values (carried).
	if write(h2Settings, 0, 0, []byte{0, h2SettingsHeaderTableSize, 0, 0, 0, 0}) != nil {
		return
	}
	bodies := map[uint32][]byte{}
	blocks := map[uint32][]byte{}
	ended := map[uint32]bool{}
	answered := map[uint32]bool{}
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		typ, flags, stream := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
		switch {
		case typ == h2Settings && flags&h2Ack == 0:
			if write(h2Settings, h2Ack, 0, nil) != nil {
				return
			}
			continue
		case answered[stream]:
			continue
		case typ == h2Headers:
			bodies[stream] = []byte{}
			blocks[stream] = payload
			ended[stream] = flags&h2EndStream != 0
			s.mu.Lock()
			early := s.answer == nil && s.answers[min(len(s.bodies), len(s.answers)-1)].early
			s.mu.Unlock()
			if early {
				flags |= h2EndStream // answered as if the request had ended
			}
		case typ == h2Data:
			if flags&h2Padded != 0 && len(payload) > 0 {
				payload = payload[1 : len(payload)-int(payload[0])]
			}
			bodies[stream] = append(bodies[stream], payload...)
		default:
			continue
		}
		if flags&h2EndStream == 0 {
			continue
		}
		answered[stream] = true
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, string(bodies[stream]))
		s.blocks = append(s.blocks, blocks[stream])
		s.ended = append(s.ended, ended[stream])
		var a h2Answer
		if s.answer != nil {
			a = s.answer(string(bodies[stream]))
		} else {
			a = s.answers[min(n, len(s.answers)-1)]
		}
		s.mu.Unlock()
		// :status is the static table's 8th name; every field is a
		// literal without indexing, no Huffman coding.
		for i := 0; a.interim != "" && (i == 0 || i < a.interims); i++ {
			if write(h2Headers, h2EndHeaders, stream, append([]byte{0x08, byte(len(a.interim))}, a.interim...)) != nil {
				return
			}
		}
		if a.refuse || a.protocolError {
			code := uint32(h2RefusedStream)
			if a.protocolError {
				code = h2ProtocolError
			}
			if write(h2RSTStream, 0, stream, binary.BigEndian.AppendUint32(nil, code)) != nil {
				return
			}
			continue
		}
		block := append([]byte{0x08, byte(len(a.status))}, a.status...)
		for _, f := range a.header {
			block = append(block, 0x00, byte(len(f[0])))
			block = append(append(block, f[0]...), byte(len(f[1])))
			block = append(block, f[1]...)
		}
		if write(h2Headers, h2EndHeaders, stream, block) != nil || write(h2Data, h2EndStream, stream, []byte(a.body)) != nil {
			return
		}
	}
}

const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// A stream refused with REFUSED_STREAM was never processed (RFC 9113
// 8.7), and net/http sends the request again on the same connection,
// the same key and bytes, to an endpoint heard from (an earlier
// payment's 2xx that did not say it ignores the key). The answer to that
// copy is then the answer to the operation's first attempt, nothing of
// ours executed before it: a replayed success is another request's
// under the key (ReviewKeyInUse, never settled as ours), and a decline
// is the operation's failure; one attempt journaled. Cleartext HTTP/2
// (h2c) behind a sidecar proxy refuses and is resent the same way
// (nginx's and Envoy's stream limits apply to either); the trace tells
// HTTP/2 there by its pseudo-header fields, with no TLS state to read.
// (On first contact the refused copy is a lost answer instead:
// TestHTTP2RefusedStreamOnFirstContactIsALostAnswer.)
func TestHTTP2RefusedStreamIsNoEarlierSend(t *testing.T) {
	const body = `{"amount":100}`
	replay, refused := h2Replay("ord_other"), h2Answer{refuse: true}
	for _, tc := range []struct {
		name    string
		answers []h2Answer
		state   idem.State
		kinds   []error
		review  string
	}{
		{"another request's replay", []h2Answer{replay}, idem.StateUnknown, []error{idem.ErrKeyConflict, idem.ErrNeedsReview}, idem.ReviewKeyInUse},
		{"refused, then another request's replay", []h2Answer{refused, replay}, idem.StateUnknown, []error{idem.ErrKeyConflict, idem.ErrNeedsReview}, idem.ReviewKeyInUse},
		{"declined", []h2Answer{h2Declined}, idem.StateFailed, []error{idem.ErrFailed}, ""},
		{"refused, then declined", []h2Answer{refused, h2Declined}, idem.StateFailed, []error{idem.ErrFailed}, ""},
	} {
		for _, srv := range rawH2Servers {
			t.Run(srv.name+"/"+tc.name, func(t *testing.T) {
				s, url, hc := srv.start(t, append([]h2Answer{h2Placed("ord_k0")}, tc.answers...)...)
				c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
				k0, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url + "/v1/payment_intents", Body: []byte(body)})
				requireOutcome(t, k0, err, idem.StateSucceeded, nil, "ord_k0", "")

				res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: url + "/v1/payment_intents", Body: []byte(body)})
				requireOutcome(t, res, err, tc.state, tc.kinds, "", tc.review)
				require.Equal(t, 1, res.Attempts)
				rec, err := c.Record(t.Context(), idem.DefaultScope, "k1")
				require.NoError(t, err)
				require.Len(t, rec.Attempts, 1, "journal: one attempt, net/http's copy inside it")
				want := []string{body}
				for range tc.answers {
					want = append(want, body)
				}
				require.Equal(t, want, s.streams(), "streams: k0's, then k1's refused one and net/http's copy, the same bytes")
				require.Equal(t, []bool{false, true, true}[:len(want)], s.carried("k1"), "k1 on each of its copies")
			})
		}
	}
}

// rawH2Servers are rawH2 over TLS and over cleartext h2c.
var rawH2Servers = []struct {
	name  string
	start func(*testing.T, ...h2Answer) (*rawH2, string, *http.Client)
}{{"TLS", startRawH2}, {"h2c", startRawH2C}}

// h2Declined is a card decline, Stripe's 402 card_error: nothing
// charged.
var h2Declined = h2Answer{status: "402", header: [][2]string{{"content-type", "application/json"}},
	body: `{"error":{"type":"card_error","code":"card_declined","message":"Your card was declined."}}`}

// h2Placed is the answer that placed order id.
func h2Placed(id string) h2Answer {
	return h2Answer{status: "200", header: [][2]string{{"content-type", "application/json"}},
		body: `{"id":"` + id + `","status":"succeeded","amount":100}`}
}

// h2Replay is order id's stored answer replayed (Stripe's
// Idempotent-Replayed).
func h2Replay(id string) h2Answer {
	a := h2Placed(id)
	a.header = append(a.header, [2]string{"idempotent-replayed", "true"})
	return a
}

// The same refusals on first contact with the endpoint: nothing has said
// yet that it de-duplicates by the key, and an HTTP/2 stream's reset the
// trace cannot tell from REFUSED_STREAM (PROTOCOL_ERROR: it may have run,
// TestKeyIgnoredEndpointHTTP2ProtocolErrorOnFirstContact) stops
// net/http's copy, so the refused stream is a lost answer, judged by
// idem: resent under the same key and bytes after its backoff, a second
// attempt journaled. An endpoint that de-duplicates (Stripe: "Subsequent
// requests with the same key return the same result",
// https://docs.stripe.com/api/idempotent_requests) places the one order,
// ord_k1, on the resend (before: net/http's copy, one attempt). The cost,
// since the refused copy counts as maybe executed: a replayed answer to
// the resend reads as ours, and a decline to it is no proof that nothing
// ran: resent while the endpoint declines, then flagged
// ReviewRefusedAfterSend, not failed.
func TestHTTP2RefusedStreamOnFirstContactIsALostAnswer(t *testing.T) {
	const body = `{"amount":100}`
	refused := h2Answer{refuse: true}
	for _, tc := range []struct {
		name    string
		answers []h2Answer
		state   idem.State
		kinds   []error
		id      string
		review  string
	}{
		{"refused, then the order", []h2Answer{refused, h2Placed("ord_k1")}, idem.StateSucceeded, nil, "ord_k1", ""},
		{"refused, then a replay", []h2Answer{refused, h2Replay("ord_other")}, idem.StateSucceeded, nil, "ord_other", ""},
		{"refused, then declined", []h2Answer{refused, h2Declined, h2Declined, h2Declined}, idem.StateUnknown, []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, "", idem.ReviewRefusedAfterSend},
	} {
		for _, srv := range rawH2Servers {
			t.Run(srv.name+"/"+tc.name, func(t *testing.T) {
				s, url, hc := srv.start(t, tc.answers...)
				c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
				res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: url + "/v1/payment_intents", Body: []byte(body)})
				requireOutcome(t, res, err, tc.state, tc.kinds, tc.id, tc.review)
				require.Equal(t, len(tc.answers), res.Attempts, "the refused copy, then idem's resends")
				rec, err := c.Record(t.Context(), idem.DefaultScope, "k1")
				require.NoError(t, err)
				require.Len(t, rec.Attempts, len(tc.answers), "journal: each copy an attempt")
				for _, a := range rec.Attempts {
					require.Equal(t, journal.AttemptSubmit, a.Kind)
					require.False(t, a.Resent, "journal: net/http sent none twice")
				}
				want := make([]string, len(tc.answers))
				carried := make([]bool, len(tc.answers))
				for i := range want {
					want[i], carried[i] = body, true
				}
				require.Equal(t, want, s.streams(), "streams: the refused one and idem's resends, the same bytes")
				require.Equal(t, carried, s.carried("k1"), "k1 on every copy")
			})
		}
	}
}

// startRawH2C serves rawH2 as cleartext HTTP/2 with prior knowledge (h2c,
// RFC 9113 3.3) on 127.0.0.1, as a service mesh's sidecar (Envoy) takes an
// application's requests, and returns a client that speaks only that, as
// a Go 1.24 Transport with Protocols set to unencrypted HTTP/2 does.
func startRawH2C(t *testing.T, answers ...h2Answer) (*rawH2, string, *http.Client) {
	t.Helper()
	s := &rawH2{answers: answers}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { s.serve(c) })
		}
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s, "http://" + ln.Addr().String(), &http.Client{Transport: tr}
}

// A host whose nodes differ (a load balancer's pool half moved to
// HTTP/2, DNS round robin over old and new proxies) answers one
// connection over HTTP/1.1 and the next over HTTP/2. net/http writes a
// request with an Idempotency-Key on a reused HTTP/1.1 connection that
// the server closes after taking it (a keep-alive race, a node's
// restart), then sends it again on a new connection, which negotiates
// HTTP/2: the first copy executed, and the replay the server gives is
// our own order, whatever protocol the copy went over. So it is when a
// rate limiter in front refuses the copy before its body is through
// (nginx's limit_req answers from the headers, RFC 9113 8.1), so that
// net/http never finishes writing it: the replay that the resend gets
// is still ours.
func TestHTTP1CopyThenHTTP2CopyIsAnEarlierSend(t *testing.T) {
	replay := h2Answer{status: "200", header: [][2]string{{"content-type", "application/json"}, {"idempotent-replayed", "true"}},
		body: `{"id":"ord_k1","status":"succeeded","amount":100}`}
	for _, tc := range []struct {
		name     string
		body     string
		answers  []h2Answer
		attempts int
	}{
		{"the copy answered with the replay", `{"amount":100}`, []h2Answer{replay}, 1},
		// Past the 64 KiB an HTTP/2 stream may send before the server
		// grants more (RFC 9113 6.9.2): a bulk order's line items.
		{"the copy rate limited before its body, then the replay", `{"amount":100,"items":"` + strings.Repeat("x", 80<<10) + `"}`,
			[]h2Answer{{early: true, status: "429", header: [][2]string{{"retry-after", "1"}}}, {early: true, status: replay.status, header: replay.header, body: replay.body}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				h1Keys []string
				orders int
			)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil || string(b) != tc.body {
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				key := r.Header.Get("Idempotency-Key")
				mu.Lock()
				h1Keys = append(h1Keys, key)
				if key == "warm" {
					mu.Unlock()
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"id":"ord_warm","status":"succeeded","amount":100}`)
					return
				}
				orders++ // committed, then the node goes away before answering
				mu.Unlock()
				c, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = c.Close()
				}
			}))
			var dials sync.Mutex
			n := 0
			srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				dials.Lock()
				defer dials.Unlock()
				n++
				cfg := srv.TLS.Clone()
				cfg.GetConfigForClient = nil
				cfg.NextProtos = []string{"http/1.1"}
				if n > 1 {
					cfg.NextProtos = []string{"h2"}
				}
				return cfg, nil
			}}
			h2 := &rawH2{answers: tc.answers}
			srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
				"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { h2.serve(c) },
			}
			hc := startTrusted(t, srv)
			c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
			warm, err := c.Submit(t.Context(), idem.Request{Key: "warm", URL: srv.URL + "/v1/orders", Body: []byte(tc.body)})
			require.NoError(t, err)
			require.Equal(t, "ord_warm", warm.ResourceID)

			res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: srv.URL + "/v1/orders", Body: []byte(tc.body)})
			requireOutcome(t, res, err, idem.StateSucceeded, nil, "ord_k1", "")
			require.Equal(t, tc.attempts, res.Attempts)
			mu.Lock()
			require.Equal(t, []string{"warm", "k1"}, h1Keys, "HTTP/1.1 copies")
			require.Equal(t, 1, orders)
			mu.Unlock()
			require.Len(t, h2.streams(), len(tc.answers), "HTTP/2 copies")
		})
	}
}
