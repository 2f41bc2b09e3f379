// Command stripe shows reconciliation by replay, for APIs that have no
// result endpoint, such as Stripe's.
//
//	go run ./examples/stripe
//
// Such an API cannot be asked "what became of key K?". It stores the
// response of the first request with a key instead and replays it, byte for
// byte and without a second side effect, to any repeat with the same key
// and the same body. So when an answer is lost, idem resends the journaled
// bytes under the journaled key: the repeat either executes (the first one
// never arrived) or returns the stored answer (it did), and in both cases
// the server holds exactly one payment.
//
// The client below has no WithResultEndpoint, sends the key bare in the
// Idempotency-Key header as Stripe expects, and adds the API key at send time
// with WithRequestHook, so it never reaches the journal. The bundled fake
// server (package idemtest, in-process on 127.0.0.1) creates the payment and
// then drops the connection before answering.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// apiKey scopes keys on the fake server, as an account does on Stripe.
const apiKey = "Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc"

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stripe:", err)
		os.Exit(1)
	}
}

// report is what the example observed, for its test.
type report struct {
	ResourceID  string // what the call returned
	Attempts    int    // HTTP exchanges idem made for it
	Effects     int    // payments the server made for the key
	Replays     int    // stored answers the server replayed
	Queries     int    // result queries (none: there is no endpoint)
	SecondCall  string // resource id the repeated Submit returned
	SecondSends int    // requests the repeated Submit caused
}

func run(ctx context.Context, w io.Writer) (report, error) {
	var rep report
	srv, err := idemtest.NewServer()
	if err != nil {
		return rep, err
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "idem-stripe-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)

	c, err := idem.Open(filepath.Join(dir, "payments.journal"),
		idem.WithHTTPClient(srv.Client()),
		// No WithResultEndpoint: ambiguity is settled by resending.
		idem.WithKeyHeader("Idempotency-Key", idem.KeyBare),
		idem.WithKeyRetention(idem.KeyRetentionStripe), // Stripe forgets keys after 24 h
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", apiKey)
			return nil
		}),
		idem.WithBackoff(func() backoff.BackOff {
			return backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMaxElapsedTime(0))
		}),
		idem.WithMaxElapsed(5*time.Second),
	)
	if err != nil {
		return rep, err
	}
	defer c.Close()

	req := idem.Request{
		Key:    "pi-draft-1001", // the application's own draft id
		URL:    srv.URL + "/v1/payment_intents",
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		Body:   []byte("amount=2000&currency=eur&customer=cus_9s6XKzkNRiz8i3"),
	}
	// The server will create the payment, then drop the connection.
	if err := srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: req.Key}); err != nil {
		return rep, err
	}

	res, err := c.Submit(ctx, req)
	if err != nil {
		return rep, fmt.Errorf("submit: %w", err)
	}
	rep.ResourceID, rep.Attempts = res.ResourceID, res.Attempts
	fmt.Fprintf(w, "Submit(%s): %s %s after %d attempts\n\n", req.Key, res.State, res.ResourceID, res.Attempts)

	fmt.Fprintln(w, "what the server saw:")
	for i, r := range srv.Requests() {
		answer := fmt.Sprint(r.Status)
		if r.Status == 0 {
			answer = "no answer: connection closed"
		}
		fault := ""
		if r.Fault != "" {
			fault = fmt.Sprintf(" (fault: %s)", r.Fault)
		}
		fmt.Fprintf(w, "  %d. %s %s  Idempotency-Key: %s  →  %s%s\n", i+1, r.Method, r.Path, r.RawKey, answer, fault)
	}
	st := srv.Stats()
	rep.Effects, rep.Replays, rep.Queries = srv.Effects(apiKey, req.Key), st.Replays, st.Queries
	fmt.Fprintf(w, "\npayments created for %s: %d (replays of the stored answer: %d, result queries: %d)\n",
		req.Key, rep.Effects, rep.Replays, rep.Queries)

	// The application runs the same handler again (a retried job, a user
	// double-click): the journal answers, nothing is sent.
	before := srv.Stats().Requests
	again, err := c.Submit(ctx, req)
	if err != nil {
		return rep, fmt.Errorf("submit again: %w", err)
	}
	rep.SecondCall, rep.SecondSends = again.ResourceID, srv.Stats().Requests-before
	fmt.Fprintf(w, "Submit(%s) again: %s %s, requests sent: %d\n", req.Key, again.State, again.ResourceID, rep.SecondSends)
	return rep, nil
}
