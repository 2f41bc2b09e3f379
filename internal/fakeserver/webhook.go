package fakeserver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SignatureHeader carries a webhook event's signature, Stripe-like:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by the secret>".
const SignatureHeader = "Idem-Signature"

// Limits on webhook delivery: deliveries are bounded in count and time.
const (
	maxWebhookQueue   = 10_000 // events waiting; more are counted lost
	maxWebhookRetries = 10
	maxWebhookDelay   = time.Minute
	webhookWorkers    = 4
	// DefaultWebhookRetries, DefaultWebhookRetryWait and
	// DefaultWebhookTimeout are the defaults of the zero fields of
	// [Webhook].
	DefaultWebhookRetries   = 3
	DefaultWebhookRetryWait = 50 * time.Millisecond
	DefaultWebhookTimeout   = 2 * time.Second
)

// Webhook configures event delivery: for every operation the server
// commits, an event per state it reaches (processing first, for slow
// processing; then succeeded or failed, once so by Config.Now: a slow
// operation's once processing ends, a still-running request's once it
// commits) is POSTed to URL, signed with
// Secret, with the faults real providers have, each drawn per event from
// the server's seed: lost, duplicated, delayed (so that events arrive out
// of order). A delivery answered other than 2xx, or failed, is retried up
// to Retries times, RetryWait apart; then it is counted failed.
type Webhook struct {
	// URL receives the events; its host must be a loopback address
	// (127.0.0.1, ::1 or localhost): the fake server never calls out.
	URL string
	// Secret keys the HMAC-SHA256 signature in SignatureHeader; required.
	Secret []byte
	// Lose, Duplicate: the probability (0..1) that an event is never
	// sent, or sent twice.
	Lose, Duplicate float64
	// Delay: each delivery waits a random time up to Delay (wall clock, at
	// most a minute) before it is sent; with several in flight, events
	// overtake one another.
	Delay time.Duration
	// Retries (default 3, at most 10; negative: none), RetryWait
	// (default 50ms) and Timeout (per delivery, default 2s) bound the
	// delivery of one event.
	Retries   int
	RetryWait time.Duration
	Timeout   time.Duration
}

// Event is the body of a webhook delivery. Like a real provider's, it
// names the provider's object (ResourceID) and echoes the metadata the
// request carried: a JSON body's "metadata" object, where a client puts
// its idempotency key to find the operation again. It does not carry the
// key by itself.
type Event struct {
	ID         string          `json:"id"`   // "evt_000001": unique per server
	Type       string          `json:"type"` // "order.processing", "order.succeeded", "order.failed"
	Created    int64           `json:"created"`
	State      string          `json:"state"` // processing, succeeded or failed
	ResourceID string          `json:"resourceId,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

// WebhookStats count the events and their deliveries since New or Reset.
type WebhookStats struct {
	Events     int `json:"events"`     // events made
	Delivered  int `json:"delivered"`  // deliveries answered 2xx, duplicates included
	Duplicated int `json:"duplicated"` // events sent twice by the duplicate fault
	Lost       int `json:"lost"`       // events never sent (the lose fault, or a full queue)
	Failed     int `json:"failed"`     // deliveries given up after every retry, or stopped by Close
	Retries    int `json:"retries"`    // deliveries sent again after a failure
}

func (w *Webhook) validate() error {
	if w == nil {
		return nil
	}
	u, err := url.Parse(w.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("webhook URL %q is not an http(s) URL", w.URL)
	case !loopbackHost(u.Hostname()):
		return fmt.Errorf("webhook URL %q: host %q is not a loopback address (want 127.0.0.1, ::1 or localhost: the fake server never calls out)", w.URL, u.Hostname())
	case len(w.Secret) == 0:
		return errors.New("webhook secret is empty (events must be signed)")
	case !(w.Lose >= 0 && w.Lose <= 1) || !(w.Duplicate >= 0 && w.Duplicate <= 1):
		return fmt.Errorf("webhook lose %v or duplicate %v is not a probability in 0..1", w.Lose, w.Duplicate)
	case w.Delay < 0 || w.Delay > maxWebhookDelay:
		return fmt.Errorf("webhook delay %v is outside 0..%v", w.Delay, maxWebhookDelay)
	case w.Retries > maxWebhookRetries:
		return fmt.Errorf("webhook retries %d is over %d", w.Retries, maxWebhookRetries)
	case w.RetryWait < 0 || w.RetryWait > maxWebhookDelay || w.Timeout < 0 || w.Timeout > maxWebhookDelay:
		return fmt.Errorf("webhook retry wait %v or timeout %v is outside 0..%v", w.RetryWait, w.Timeout, maxWebhookDelay)
	}
	return nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Sign returns the SignatureHeader value for body at t.
func Sign(secret, body []byte, t time.Time) string {
	return "t=" + strconv.FormatInt(t.Unix(), 10) + ",v1=" + hex.EncodeToString(signature(secret, t.Unix(), body))
}

func signature(secret []byte, t int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// delivery is one event on its way, with the faults drawn for it.
type delivery struct {
	gen    uint64
	body   []byte
	copies int // 1, or 2 when duplicated
	delay  [2]time.Duration
}

// webhooks sends events for a Server.
type webhooks struct {
	cfg    Webhook
	now    func() time.Time
	hc     *http.Client
	queue  chan *delivery
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// rng and nextID are guarded by the Server's mutex: events are made
	// inside the Server's decisions.
	rng    *rand.Rand
	nextID int

	mu      sync.Mutex // guards the fields below; taken after the Server's
	gen     uint64     // the Server's generation (Reset)
	stats   WebhookStats
	pending int             // deliveries queued or in flight
	idle    []chan struct{} // closed when pending drops to 0
}

func newWebhooks(cfg Webhook, now func() time.Time, seed uint64) *webhooks {
	if cfg.Retries == 0 {
		cfg.Retries = DefaultWebhookRetries
	}
	if cfg.Retries < 0 {
		cfg.Retries = 0
	}
	if cfg.RetryWait == 0 {
		cfg.RetryWait = DefaultWebhookRetryWait
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultWebhookTimeout
	}
	dialer := &net.Dialer{
		Timeout: cfg.Timeout,
		// The URL's host was checked; this checks the address it resolved
		// to ("localhost" may be anything).
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil || !loopbackHost(host) || host == "localhost" {
				return fmt.Errorf("fakeserver: webhook: refusing to dial %s: not a loopback address", address)
			}
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &webhooks{
		cfg: cfg,
		now: now,
		hc: &http.Client{
			Timeout:       cfg.Timeout,
			Transport:     &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConnsPerHost: webhookWorkers},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		queue:  make(chan *delivery, maxWebhookQueue),
		ctx:    ctx,
		cancel: cancel,
		rng:    rand.New(rand.NewPCG(seed^0x5bd1e995, seed)),
	}
	for range webhookWorkers {
		w.wg.Add(1)
		go w.work()
	}
	return w
}

// eventLocked makes the events of entry e, just committed for a request
// with body, and queues their deliveries. The Server's mutex is held.
func (s *Server) eventLocked(e *entry, body []byte, now time.Time) {
	w := s.hooks
	if w == nil || e.noResult || e.foreign {
		return
	}
	meta := metadataOf(body)
	if e.running(now) {
		// A request still running has not committed: an event now would
		// tell of an order that may yet not exist.
		s.holdLocked(heldEvent{e: e, meta: meta, at: e.committedBy}, now)
		return
	}
	s.eventsOfLocked(e, meta, now)
}

// heldEvent is the webhook event of an operation whose outcome is not
// yet so by the server's clock, held until at: a request still running
// until it commits, a slow one's final state until processing ends.
type heldEvent struct {
	e    *entry
	meta json.RawMessage
	at   time.Time
}

// holdLocked holds h until its time, by the server's clock
// (releaseLocked).
func (s *Server) holdLocked(h heldEvent, now time.Time) {
	s.held = append(s.held, h)
	gen := s.gen
	time.AfterFunc(h.at.Sub(now), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if gen == s.gen {
			s.releaseLocked(s.cfg.Now())
		}
	})
}

// releaseLocked queues the held events whose time has come by now. It
// runs at every request, at FlushWebhooks and WebhookStats, and when the
// event's delay has passed in real time: with the server's clock the
// wall clock, that is the time itself. A clock that never reaches it
// never releases it.
func (s *Server) releaseLocked(now time.Time) {
	if len(s.held) == 0 || s.hooks.ctx.Err() != nil {
		return // nothing held, or closed: no delivery can be made
	}
	held := s.held[:0]
	for _, h := range s.held {
		if now.Before(h.at) {
			held = append(held, h)
			continue
		}
		s.eventsOfLocked(h.e, h.meta, h.at)
	}
	clear(s.held[len(held):])
	s.held = held
}

// eventsOfLocked queues the events of e, committed at now.
func (s *Server) eventsOfLocked(e *entry, meta json.RawMessage, now time.Time) {
	if e.processing(now) {
		// Its final state is not so until processing ends: the result
		// endpoint says processing until then.
		s.queueEventLocked(Event{Type: "order.processing", State: stateProcessing, ResourceID: e.resourceID, Metadata: meta}, now)
		s.holdLocked(heldEvent{e: e, meta: meta, at: e.doneAt}, now)
		return
	}
	s.queueEventLocked(Event{Type: "order." + e.state, State: e.state, ResourceID: e.resourceID, Reason: e.reason, Metadata: meta}, now)
}

func (s *Server) queueEventLocked(ev Event, now time.Time) {
	w := s.hooks
	w.nextID++
	ev.ID = fmt.Sprintf("evt_%06d", w.nextID)
	ev.Created = now.Unix()
	body, err := json.Marshal(ev)
	lost := err != nil || w.rng.Float64() < w.cfg.Lose
	d := &delivery{gen: s.gen, body: body, copies: 1}
	if w.rng.Float64() < w.cfg.Duplicate {
		d.copies = 2
	}
	for i := range d.copies {
		if w.cfg.Delay > 0 {
			d.delay[i] = time.Duration(w.rng.Int64N(int64(w.cfg.Delay) + 1))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Events++
	if !lost {
		select {
		case w.queue <- d:
			w.pending += d.copies
			if d.copies == 2 {
				w.stats.Duplicated++
			}
			return
		default: // queue full: lost, as a provider's backlog loses events
		}
	}
	w.stats.Lost++
}

// metadataOf returns a JSON object body's "metadata" object, or nil.
func metadataOf(body []byte) json.RawMessage {
	var v struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Metadata) == 0 || v.Metadata[0] != '{' {
		return nil
	}
	return v.Metadata
}

// work delivers events until the Server closes.
func (w *webhooks) work() {
	defer w.wg.Done()
	for {
		select {
		case <-w.ctx.Done():
			return
		case d := <-w.queue:
			var copies sync.WaitGroup
			for i := range d.copies {
				copies.Add(1)
				go func() {
					defer copies.Done()
					w.deliver(d, d.delay[i])
				}()
			}
			copies.Wait()
		}
	}
}

// deliver sends one copy of d, retrying within its bounds, and reports
// how it went.
func (w *webhooks) deliver(d *delivery, delay time.Duration) {
	ok, retries := false, 0
	if w.wait(delay) {
		for try := 0; try <= w.cfg.Retries; try++ {
			if try > 0 {
				if !w.wait(w.cfg.RetryWait) {
					break // closed: this retry was never sent
				}
				retries++
			}
			if ok = w.post(d.body); ok {
				break
			}
		}
	}
	w.done(d, ok, retries)
}

// done counts a finished copy of d and wakes Flush when none is left.
func (w *webhooks) done(d *delivery, ok bool, retries int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d.gen == w.gen {
		w.stats.Retries += retries
		if ok {
			w.stats.Delivered++
		} else {
			w.stats.Failed++
		}
	}
	w.pending--
	if w.pending == 0 {
		for _, ch := range w.idle {
			close(ch)
		}
		w.idle = nil
	}
}

// reset forgets the counters; deliveries of an older generation are no
// longer counted.
func (w *webhooks) reset(gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen = gen
	w.stats = WebhookStats{}
}

// flush waits until no delivery is queued or in flight.
func (w *webhooks) flush(ctx context.Context) error {
	if w.ctx.Err() != nil {
		return errClosed
	}
	w.mu.Lock()
	if w.pending == 0 {
		w.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	w.idle = append(w.idle, ch)
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.ctx.Done():
		return errClosed
	}
}

func (w *webhooks) statsNow() WebhookStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

var errClosed = errors.New("server closed")

// wait waits d, or until the Server closes; it reports whether it waited.
func (w *webhooks) wait(d time.Duration) bool {
	if d <= 0 {
		return w.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// post sends one delivery and reports whether it was answered 2xx.
func (w *webhooks) post(body []byte) bool {
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(w.cfg.Secret, body, w.now()))
	resp, err := w.hc.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// close stops every delivery and waits for the workers.
// Deliveries it stops, and those still queued, count as failed.
func (w *webhooks) close() {
	w.cancel()
	w.wg.Wait()
	for {
		select {
		case d := <-w.queue:
			for range d.copies {
				w.done(d, false, 0)
			}
		default:
			w.hc.CloseIdleConnections()
			return
		}
	}
}
