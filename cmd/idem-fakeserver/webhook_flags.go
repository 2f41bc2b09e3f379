package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// webhookFlags lists the webhook flags, in usage order.
var webhookFlags = []string{
	"webhook-url", "webhook-secret", "webhook-lose", "webhook-duplicate", "webhook-delay", "webhook-retries",
}

// webhookOptions are the webhook flags; events are sent only with -webhook-url.
type webhookOptions struct {
	url, secret     string
	lose, duplicate rate
	delay           time.Duration
	retries         int
}

func (w *webhookOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&w.url, "webhook-url", "", "send an event for every state of each committed operation to this loopback `URL`")
	fs.StringVar(&w.secret, "webhook-secret", "", "`secret` that signs events (HMAC-SHA256 in the "+fakeserver.SignatureHeader+" header); required with -webhook-url")
	fs.Var(&w.lose, "webhook-lose", "probability that an event is never sent")
	fs.Var(&w.duplicate, "webhook-duplicate", "probability that an event is sent twice")
	fs.DurationVar(&w.delay, "webhook-delay", 0, "each delivery waits a random time up to this, so events arrive out of order (at most 1m)")
	fs.IntVar(&w.retries, "webhook-retries", fakeserver.DefaultWebhookRetries, "deliveries retried at most this often after a failure or a non-2xx answer")
}

// resolve sets cfg.Webhook from the flags; the server checks the rest.
func (w *webhookOptions) resolve(cfg *fakeserver.Config, set map[string]bool) error {
	if w.url == "" {
		for _, name := range webhookFlags[1:] {
			if set[name] {
				return fmt.Errorf("-%s without -webhook-url", name)
			}
		}
		return nil
	}
	if w.secret == "" {
		return errors.New("-webhook-url without -webhook-secret: events must be signed")
	}
	retries := w.retries
	if retries == 0 {
		retries = -1 // none, as the flag says; the server's zero is its default
	}
	cfg.Webhook = &fakeserver.Webhook{
		URL: w.url, Secret: []byte(w.secret), Lose: float64(w.lose), Duplicate: float64(w.duplicate),
		Delay: w.delay, Retries: retries,
	}
	return nil
}

func printWebhookUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `
Webhooks: with -webhook-url, every state a committed operation reaches is
POSTed there as a signed event ({"id","type","state","resourceId","metadata",…};
metadata echoes a JSON body's "metadata" object), with the faults below.
`)
	for _, name := range webhookFlags {
		printFlag(w, fs.Lookup(name))
	}
}
