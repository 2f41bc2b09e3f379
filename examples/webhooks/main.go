// Command webhooks settles operations from the provider's webhook events,
// including one that no retry or query could settle any more.
//
//	go run ./examples/webhooks
//
// Stripe offers no lookup by idempotency key, and replays a key's stored
// answer for 24 hours only: an order whose response was lost, and whose
// process then stayed down past that window, can no longer be settled by
// resending (it might execute twice) nor by asking. idem flags it for
// review. But the provider told the service what happened, in a webhook
// event; Client.Confirm hands that answer to idem, which records it with
// the event's id and settles the order for good.
//
// The pattern:
//
//   - Put the idempotency key in the request's metadata
//     ({"metadata":{"idem_key":"…"}}): providers echo metadata in the
//     events about the object, so the event finds its operation. (An
//     event that names only the provider's object id can still find an
//     operation whose response named it: Client.LookupResource.)
//   - Verify the event's signature (HMAC-SHA256 over "timestamp.body",
//     compared in constant time, timestamp within a tolerance), acknowledge
//     it quickly, and confirm it: Confirm is idempotent per event id, so
//     redelivered and out-of-order events are harmless, and one that
//     contradicts what idem recorded is flagged, never applied.
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
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := run(ctx, os.Stdout)
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
	ReviewBefore              int // flagged before the events were processed
	Review                    int // still flagged at the end
	Duplicates                int // orders the server created more than once
	Events, Redelivered       int // events received; those seen before
	BadSignatures             int
	SettledByEvent            int
}

// receiver verifies and queues the provider's events, as a webhook
// endpoint should: answer fast, process later.
type receiver struct {
	now func() time.Time
	mu  sync.Mutex
	q   []idemtest.WebhookEvent
	bad int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<10))
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
	r.q = append(r.q, ev)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// take returns the queued events and empties the queue.
func (r *receiver) take() []idemtest.WebhookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	r.q = nil
	return q
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

func run(ctx context.Context, w io.Writer) (report, error) {
	rep := report{Orders: orders}
	clock := idemtest.NewClock(time.Now().UTC())
	rcv := &receiver{now: clock.Now}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	hooks := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hooks.Serve(ln) }()
	defer hooks.Close()

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

	// 1. Orders, each with its key in the metadata. The first one's
	// response is lost after the provider created the order (on the
	// client's first connection: net/http would quietly resend a request
	// whose reused connection died, and the replay would settle it); the
	// fourth is declined.
	keys := make([]string, orders)
	for i := range keys {
		keys[i] = idem.NewKey()
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
		default:
			fmt.Fprintf(w, "order %d: %s %s\n", i+1, res.State, res.ResourceID)
		}
	}

	// The provider's events arrive (signed, some twice, out of order);
	// the receiver checks and queues them.
	if err := srv.FlushWebhooks(ctx); err != nil {
		return rep, err
	}

	// 2. The service's workers are down for a day and a bit: past the key
	// window. Resume may no longer resend the lost order, and cannot ask
	// about it: review. Until now, only a person could settle it.
	clock.Advance(idem.KeyRetentionStripe + time.Hour)
	if _, err := client.Resume(ctx); err != nil {
		return rep, err
	}
	flagged, err := client.List(ctx, idem.Filter{Review: true})
	if err != nil {
		return rep, err
	}
	rep.ReviewBefore = len(flagged)
	for _, op := range flagged {
		fmt.Fprintf(w, "a day later: %s... flagged for review: %s\n", op.Key[:8], op.Review)
	}

	// 3. The workers process the queued events.
	open, err := client.List(ctx, idem.Filter{Open: true})
	if err != nil {
		return rep, err
	}
	wasOpen := map[string]bool{}
	for _, op := range open {
		wasOpen[op.Key] = true
	}
	for _, ev := range rcv.take() {
		rep.Events++
		key, c, ok := confirmation(ev)
		if !ok {
			continue
		}
		res, err := client.Confirm(ctx, "", key, c)
		switch {
		case errors.Is(err, idem.ErrNotFound):
			continue // not one of ours
		case errors.Is(err, idem.ErrConfirmConflict):
			fmt.Fprintf(w, "event %s contradicts order %s...: flagged\n", ev.ID, key[:8])
			continue
		case err != nil:
			return rep, err
		}
		if wasOpen[key] && res.State.Terminal() {
			wasOpen[key] = false
			rep.SettledByEvent++
			fmt.Fprintf(w, "event %s (%s) settled %s...: %s %s\n", ev.ID, ev.Type, key[:8], res.State, res.ResourceID)
		}
	}
	rcv.mu.Lock()
	rep.BadSignatures = rcv.bad
	rcv.mu.Unlock()
	rep.Redelivered = srv.WebhookStats().Duplicated

	// 4. What the journal and the server say.
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
	fmt.Fprintf(w, "%d events (%d redelivered), %d bad signatures; %d orders: %d succeeded, %d failed, %d in review (before the events: %d), %d duplicates on the server\n",
		rep.Events, rep.Redelivered, rep.BadSignatures, rep.Orders, rep.Succeeded, rep.Failed, rep.Review, rep.ReviewBefore, rep.Duplicates)
	return rep, nil
}
