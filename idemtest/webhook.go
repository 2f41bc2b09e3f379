package idemtest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// WebhookSignatureHeader carries a webhook event's signature, as Stripe's
// does: "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">", keyed by
// [Webhook].Secret. A receiver recomputes it, compares in constant time
// (crypto/hmac.Equal) and refuses a timestamp outside its tolerance.
const WebhookSignatureHeader = fakeserver.SignatureHeader

// Webhook configures event delivery (see [WithWebhook]): for every
// operation the server commits, an event per state it reaches (succeeded
// or failed, sent at once; for slow processing, processing at once, then
// succeeded once processing ends; a still-running request's once it
// commits; both by the server's clock) is
// POSTed to URL, signed with Secret, with the faults real providers have,
// drawn per event from the server's seed: lost, duplicated, delayed (so
// that events overtake one another). A delivery that fails, or is
// answered other than 2xx, is retried up to Retries times, RetryWait
// apart, then given up.
type Webhook struct {
	// URL receives the events; its host must be a loopback address
	// (127.0.0.1, ::1 or localhost).
	URL string
	// Secret keys the signature; required.
	Secret []byte
	// Lose, Duplicate: the probability (0..1) that an event is never sent,
	// or sent twice.
	Lose, Duplicate float64
	// Delay: each delivery waits a random time up to Delay (wall clock, at
	// most a minute) before it is sent.
	Delay time.Duration
	// Retries (default 3, at most 10; negative: none), RetryWait (default
	// 50ms) and Timeout (per delivery, default 2s) bound one event's
	// delivery.
	Retries   int
	RetryWait time.Duration
	Timeout   time.Duration
}

// WebhookEvent is the JSON body of a delivery. Like a real provider's it
// names the server's object (ResourceID) and echoes the request's
// metadata (a JSON body's "metadata" object), where a client puts its
// idempotency key to find the operation again; it does not carry the key
// by itself.
type WebhookEvent struct {
	ID         string          `json:"id"`   // "evt_000001": unique per server
	Type       string          `json:"type"` // "order.processing", "order.succeeded", "order.failed"
	Created    int64           `json:"created"`
	State      string          `json:"state"` // processing, succeeded or failed
	ResourceID string          `json:"resourceId,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

// WebhookStats count events and deliveries since NewServer or Reset.
type WebhookStats struct {
	Events     int `json:"events"`     // events made
	Delivered  int `json:"delivered"`  // deliveries answered 2xx, duplicates included
	Duplicated int `json:"duplicated"` // events sent twice by the duplicate fault
	Lost       int `json:"lost"`       // events never sent (the lose fault, or a full queue)
	Failed     int `json:"failed"`     // deliveries given up after every retry, or stopped by Close
	Retries    int `json:"retries"`    // deliveries sent again after a failure
}

// WithWebhook makes the server send webhook events as w says. The server
// runs delivery goroutines until Close, which stops them. [NewServer]
// returns an error if w is invalid (a URL that is not loopback, an empty
// secret, a probability outside 0..1, a bound over its limit).
func WithWebhook(w Webhook) Option {
	return optionFunc(func(cfg *fakeserver.Config) {
		in := fakeserver.Webhook(w)
		cfg.Webhook = &in
	})
}

// FlushWebhooks waits until every event made so far has been delivered or
// given up, or ctx ends, or the server is closed. Without WithWebhook it
// returns at once. An event is made once its state is so by the server's
// clock (see [Webhook]): with [WithClock], a slow or still-running
// operation's final event only once the clock has passed its delay;
// FlushWebhooks does not wait for it before that.
func (s *Server) FlushWebhooks(ctx context.Context) error {
	if err := s.srv.FlushWebhooks(ctx); err != nil {
		return rewrap("FlushWebhooks", err)
	}
	return nil
}

// WebhookStats returns the webhook counters; zero without WithWebhook.
func (s *Server) WebhookStats() WebhookStats { return WebhookStats(s.srv.WebhookStats()) }
