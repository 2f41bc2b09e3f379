package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// stripeConfirmation maps a verified Stripe event to what Confirm takes,
// for an operation that creates a PaymentIntent; ok is false for an event
// that must not be confirmed.
//
// It reads the object the event carries, not the event's type. Only a
// PaymentIntent is the operation's own object: a Charge is one attempt to
// move money for it (charge.failed for a declined card, while the
// customer's next card may pay the intent), and refunds and disputes are
// other objects, even when their metadata holds the same key. And only a
// status the PaymentIntent never leaves settles it: succeeded, or
// canceled (no charge can be made on it any more). payment_intent.
// payment_failed says one attempt failed: the intent went back to
// requires_payment_method, and the customer may still pay it
// (https://docs.stripe.com/payments/paymentintents/lifecycle,
// https://docs.stripe.com/payments/payment-intents/verifying-status).
// Confirmed as failed, it would fire the Settle hook with "failed" while
// the payment can still succeed, and a new payment offered then is a
// second one. The object is read as the event carries it, so a late
// delivery (Stripe does not order events, and retries them for three
// days: https://docs.stripe.com/webhooks) says what was true then.
func stripeConfirmation(body []byte) (key string, c idem.Confirmation, ok bool) {
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			Object struct {
				ID       string            `json:"id"`
				Object   string            `json:"object"`
				Status   string            `json:"status"`
				Metadata map[string]string `json:"metadata"`
			} `json:"object"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return "", c, false
	}
	o := ev.Data.Object
	if o.Object != "payment_intent" || o.Metadata["idem_key"] == "" {
		return "", c, false
	}
	c = idem.Confirmation{ResourceID: o.ID, Source: "stripe", EventID: ev.ID, Reason: ev.Type}
	switch o.Status {
	case "succeeded":
		c.State = idem.StateSucceeded
	case "canceled":
		c.State = idem.StateFailed
	default:
		return "", c, false
	}
	return o.Metadata["idem_key"], c, true
}

// A PaymentIntent waits for the customer (3D Secure: the fake server
// answers "processing"). Stripe's events for it arrive as they do: the
// customer's first card is declined (payment_intent.payment_failed and
// charge.failed), the second pays it, an event is delivered twice, and a
// refund made later carries the key in its own metadata. Only the
// intent's success settles the operation.
func ExampleClient_Confirm_attemptFailed() {
	clock := idemtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	settled := 0
	c, err := idem.Open(filepath.Join(dir, "payments.journal"), idem.WithHTTPClient(srv.Client()), idem.WithClock(clock),
		idem.WithHooks(idem.Hooks{Settle: func(context.Context, *idem.Result) { settled++ }}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	if err := srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "order-42", Delay: time.Hour}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Submit(ctx, idem.Request{Key: "order-42", URL: srv.URL + "/v1/payment_intents",
		Body: []byte(`{"amount":1999,"currency":"eur","metadata":{"idem_key":"order-42"}}`)})
	fmt.Println(res.State, res.ResourceID, errors.Is(err, idem.ErrUnknownOutcome))

	events := []string{
		`{"id":"evt_1","type":"payment_intent.payment_failed","data":{"object":{"id":"ord_000001","object":"payment_intent","status":"requires_payment_method","metadata":{"idem_key":"order-42"}}}}`,
		`{"id":"evt_2","type":"charge.failed","data":{"object":{"id":"ch_1","object":"charge","status":"failed","payment_intent":"ord_000001","metadata":{"idem_key":"order-42"}}}}`,
		`{"id":"evt_3","type":"payment_intent.succeeded","data":{"object":{"id":"ord_000001","object":"payment_intent","status":"succeeded","metadata":{"idem_key":"order-42"}}}}`,
		`{"id":"evt_3","type":"payment_intent.succeeded","data":{"object":{"id":"ord_000001","object":"payment_intent","status":"succeeded","metadata":{"idem_key":"order-42"}}}}`,
		`{"id":"evt_4","type":"refund.created","data":{"object":{"id":"re_1","object":"refund","status":"succeeded","payment_intent":"ord_000001","metadata":{"idem_key":"order-42"}}}}`,
	}
	for _, body := range events {
		key, conf, ok := stripeConfirmation([]byte(body))
		if !ok {
			fmt.Println("not confirmed")
			continue
		}
		res, err := c.Confirm(ctx, "", key, conf)
		fmt.Println(conf.Reason+":", res.State, res.ResourceID, err)
	}
	op, _ := c.Lookup(ctx, "", "order-42")
	fmt.Printf("%s, review %q, settled %d time(s)\n", op.State, op.Review, settled)
	// Output:
	// processing ord_000001 true
	// not confirmed
	// not confirmed
	// payment_intent.succeeded: succeeded ord_000001 <nil>
	// payment_intent.succeeded: succeeded ord_000001 <nil>
	// not confirmed
	// succeeded, review "", settled 1 time(s)
}
