// Command webhooks settles operations from the provider's webhook events,
// including one that no query could settle.
//
//	go run ./examples/webhooks
//
// Stripe offers no lookup by idempotency key, and replays a key's stored
// answer for 24 hours only: an order whose response was lost can be
// settled by resending it within that window, and after it by nobody but
// a person (idem flags it for review). But the provider tells the service
// what happened, in a webhook event; Client.Confirm hands that answer to
// idem, which records it with the event's id and settles the order for
// good, with no resend.
//
// The pattern:
//
//   - Put the idempotency key in the request's metadata
//     ({"metadata":{"idem_key":"…"}}): providers echo metadata in the
//     events about the object, so the event finds its operation. (An
//     event that names only the provider's object id can still find an
//     operation whose response named it: Client.LookupResource.)
//   - Verify the event's signature (HMAC-SHA256 over "timestamp.body",
//     compared in constant time, timestamp within a tolerance), confirm
//     it, and only then answer: 2xx once Confirm has recorded it, 5xx when
//     Confirm failed, so that the provider sends it again (an event
//     acknowledged and then lost is never sent again), and a 4xx that
//     says why for an event a redelivery alone cannot help (larger than
//     maxEvent until it is raised, or refused by Confirm as invalid).
//     Confirm is idempotent per event id, so redelivered and out-of-order
//     events are harmless, and one that contradicts what idem recorded is
//     flagged, never applied.
//
// The fake server (package idemtest, on 127.0.0.1) signs its events and
// delivers them late, duplicated and out of order; the receiver below
// listens on 127.0.0.1 too. Client and server share a manual clock, so "a
// day later" costs nothing.
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

const (
	apiKey        = "Bearer sk_test_webhooks"
	webhookSecret = "whsec_example"
	// tolerance bounds the age of a signed timestamp: an old event replayed
	// by an attacker is refused.
	tolerance = 5 * time.Minute
	orders    = 6
	// maxEvent bounds an event's body: a receiver reads what anyone sends
	// it before it can check the signature. Providers send the whole
	// object in the event; raise it if the log says events are cut.
	maxEvent = 64 << 10
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := run(ctx, os.Stdout, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhooks:", err)
		os.Exit(1)
	}
	if rep.Review > 0 || rep.Duplicates > 0 {
		os.Exit(1)
	}
}

// report is what the example observed, for its test.
type report struct {
	Orders, Succeeded, Failed int
	Review                    int // flagged a day later, past the key window
	Duplicates                int // orders the server created more than once
	Events, Redelivered       int // events received; those seen before
	Retried                   int // deliveries the provider sent again after a non-2xx answer
	BadSignatures             int
	SettledByEvent            int
}

// receiver verifies the provider's events and confirms each before it
// answers: a 2xx tells the provider the event is kept, and it never sends
// that one again.
type receiver struct {
	now     func() time.Time
	confirm confirmFunc

	mu      sync.Mutex
	events  int
	bad     int
	settled map[string]bool // keys an event settled
	log     []string        // what the events did, for the output
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxEvent))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		// Not a forged event (cut, its signature would fail): one this
		// receiver can never take. Said as what it is, it is found in
		// the provider's dashboard and the log as too large, not as a
		// "bad signature"; the provider still sends it again (any
		// non-2xx), so raising maxEvent lets a redelivery through.
		r.mu.Lock()
		r.log = append(r.log, fmt.Sprintf("an event larger than %d bytes: answered 413; raise maxEvent", maxEvent))
		r.mu.Unlock()
		http.Error(w, "event too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	if err := verify(req.Header.Get(idemtest.WebhookSignatureHeader), body, []byte(webhookSecret), r.now()); err != nil {
		r.mu.Lock()
		r.bad++
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ev idemtest.WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.events++
	r.mu.Unlock()
	key, c, ok := confirmation(ev)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// No bound of the handler's own: Confirm finishes its journal write
	// even once ctx ends (a provider that stops waiting must not leave it
	// half-known), so a timeout here would shorten nothing. The write is
	// one commit (milliseconds); a journal that stalls holds the handler
	// until the provider gives up and sends the event again, which finds
	// it recorded if the write went through. pgjournal bounds its own
	// calls (WithCallTimeout), and that error is answered 503 below.
	res, err := r.confirm(req.Context(), "", key, c)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, idem.ErrNotFound):
		// Not one of ours: answered 2xx, or it comes back for days.
	case errors.Is(err, idem.ErrInvalidRequest):
		// Signed by the provider, yet refused by Confirm: it will be
		// refused the same way each time it comes back, so no "try
		// again". Its order stays open, to be settled by its query or
		// flagged past the key window; a person reads why here.
		r.log = append(r.log, fmt.Sprintf("event %s refused: %v: answered 422", ev.ID, err))
		http.Error(w, "event refused", http.StatusUnprocessableEntity)
		return
	case errors.Is(err, idem.ErrConfirmConflict):
		r.log = append(r.log, fmt.Sprintf("event %s contradicts order %s: flagged", ev.ID, short(key)))
	case err != nil:
		// The event may not be recorded (the journal failed, or the
		// client is closing): the provider must send it again.
		r.log = append(r.log, fmt.Sprintf("event %s: %v: answered 503", ev.ID, err))
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	case res.Confirmed && !r.settled[key]:
		r.settled[key] = true
		r.log = append(r.log, fmt.Sprintf("event %s (%s) settled %s: %s %s", ev.ID, ev.Type, short(key), res.State, res.ResourceID))
	}
	w.WriteHeader(http.StatusNoContent)
}

// short shortens a key for the log. The key is the service's own, as
// the event echoes it: it may be shorter than the prefix kept.
func short(key string) string {
	if len(key) <= 8 {
		return key
	}
	return key[:8] + "..."
}

// verify checks a "t=…,v1=…" signature header against body.
func verify(header string, body, secret []byte, now time.Time) error {
	var ts int64 = -1
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errors.New("bad timestamp")
			}
			ts = n
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	if ts < 0 || len(sigs) == 0 {
		return errors.New("no timestamp or signature")
	}
	if age := now.Sub(time.Unix(ts, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("timestamp outside the %v tolerance", tolerance)
	}
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%d.", ts)
	m.Write(body)
	want := m.Sum(nil)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) { // constant time
			return nil
		}
	}
	return errors.New("signature mismatch")
}

// confirmation turns a provider event into what idem records; ok is false
// for an event that settles nothing (processing) or names no key. The
// fake server's "failed" is final for its order; a real provider's failed
// attempt often is not (Stripe's payment_intent.payment_failed leaves the
// intent payable): confirm only a state the object never leaves (README,
// "Settling from webhooks").
func confirmation(ev idemtest.WebhookEvent) (key string, c idem.Confirmation, ok bool) {
	var meta struct {
		Key string `json:"idem_key"`
	}
	if json.Unmarshal(ev.Metadata, &meta) != nil || meta.Key == "" {
		return "", c, false
	}
	c = idem.Confirmation{ResourceID: ev.ResourceID, Source: "provider-webhook", EventID: ev.ID, Reason: ev.Type}
	switch ev.State {
	case "succeeded":
		c.State = idem.StateSucceeded
	case "failed":
		c.State = idem.StateFailed
	default:
		return "", c, false
	}
	return meta.Key, c, true
}

// confirmFunc is Client.Confirm; a test wraps it to make the journal fail.
type confirmFunc func(ctx context.Context, scope, key string, c idem.Confirmation) (*idem.Result, error)

func run(ctx context.Context, w io.Writer, wrap func(confirmFunc) confirmFunc) (report, error) {
	rep := report{Orders: orders}
	clock := idemtest.NewClock(time.Now().UTC())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now), idemtest.WithSeed(3), idemtest.WithWebhook(idemtest.Webhook{
		URL: "http://" + ln.Addr().String() + "/webhooks", Secret: []byte(webhookSecret),
		Duplicate: 0.5, Delay: 30 * time.Millisecond,
	}))
	if err != nil {
		return rep, err
	}
	defer srv.Close()

	dir, err := os.MkdirTemp("", "idem-webhooks-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	// No result endpoint, as on Stripe; one attempt per call, so that a
	// lost response leaves its order open for the story below.
	client, err := idem.Open(filepath.Join(dir, "orders.journal"),
		idem.WithClock(clock),
		idem.WithKeyRetention(idem.KeyRetentionStripe),
		idem.WithMaxAttempts(1),
		idem.WithHTTPClient(srv.Client()),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", apiKey)
			return nil
		}),
	)
	if err != nil {
		return rep, err
	}
	defer client.Close()

	// The webhook endpoint confirms with the Client.
	rcv := &receiver{now: clock.Now, confirm: client.Confirm, settled: map[string]bool{}}
	if wrap != nil {
		rcv.confirm = wrap(rcv.confirm)
	}
	hooks := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hooks.Serve(ln) }()
	defer hooks.Close()

	// 1. Orders, each with its key in the metadata. The first one's
	// response is lost after the provider created the order (on the
	// client's first connection: net/http would quietly resend a request
	// whose reused connection died, and the replay would settle it); the
	// fourth is declined. The provider's events arrive meanwhile (signed,
	// some twice, out of order) and are confirmed as they come.
	keys := make([]string, orders)
	for i := range keys {
		// The order's own id, never a key made per call: a handler run
		// again for the order (a retry, a redelivery) finds its operation.
		keys[i] = fmt.Sprintf("order-%d", 1001+i)
		switch i {
		case 0:
			if err := srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: keys[i]}); err != nil {
				return rep, err
			}
		case 3:
			if err := srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: keys[i]}); err != nil {
				return rep, err
			}
		}
		body := fmt.Sprintf(`{"amount":%d,"currency":"eur","metadata":{"idem_key":%q}}`, 1000+i, keys[i])
		res, err := client.Submit(ctx, idem.Request{Key: keys[i], URL: srv.URL + "/v1/payment_intents", Body: []byte(body)})
		switch {
		case errors.Is(err, idem.ErrUnknownOutcome):
			fmt.Fprintf(w, "order %d: %s, response lost\n", i+1, res.State)
		case err != nil && !errors.Is(err, idem.ErrFailed):
			return rep, err
		case res.Confirmed:
			// Its event came first, while the lost response was awaited.
			fmt.Fprintf(w, "order %d: response lost, settled by its event: %s %s\n", i+1, res.State, res.ResourceID)
		default:
			fmt.Fprintf(w, "order %d: %s %s\n", i+1, res.State, res.ResourceID)
		}
	}

	if err := srv.FlushWebhooks(ctx); err != nil {
		return rep, err
	}
	rcv.mu.Lock()
	rep.Events, rep.BadSignatures, rep.SettledByEvent = rcv.events, rcv.bad, len(rcv.settled)
	for _, line := range rcv.log {
		fmt.Fprintln(w, line)
	}
	rcv.mu.Unlock()
	stats := srv.WebhookStats()
	rep.Redelivered, rep.Retried = stats.Duplicated, stats.Retries

	// 2. The service's workers are down for a day and a bit: past the key
	// window, Resume may no longer resend the lost order, and cannot ask
	// about it. Had its event not settled it, it would be flagged now.
	clock.Advance(idem.KeyRetentionStripe + time.Hour)
	if _, err := client.Resume(ctx); err != nil {
		return rep, err
	}

	// 3. What the journal and the server say.
	for _, key := range keys {
		op, err := client.Lookup(ctx, "", key)
		if err != nil {
			return rep, err
		}
		switch {
		case op.Review != "":
			rep.Review++
		case op.State == idem.StateSucceeded:
			rep.Succeeded++
		case op.State == idem.StateFailed:
			rep.Failed++
		}
		if srv.Effects(apiKey, key) > 1 {
			rep.Duplicates++
		}
	}
	fmt.Fprintf(w, "%d events (%d redelivered, %d retried), %d bad signatures; %d orders: %d succeeded (%d by an event), %d failed, %d in review a day later, %d duplicates on the server\n",
		rep.Events, rep.Redelivered, rep.Retried, rep.BadSignatures, rep.Orders, rep.Succeeded, rep.SettledByEvent, rep.Failed, rep.Review, rep.Duplicates)
	return rep, nil
}
