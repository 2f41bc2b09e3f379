package idem_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The server creates the order and the connection drops before the answer:
// idem asks the result endpoint instead of guessing, and the server holds
// exactly one order.
func ExampleClient_Submit() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)

	c, err := idem.Open(filepath.Join(dir, "orders.journal"),
		idem.WithHTTPClient(srv.Client()),
		idem.WithResultEndpoint(srv.ResultTemplate()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	if err := srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "order-42"}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Submit(context.Background(), idem.Request{
		Key:  "order-42",
		URL:  srv.URL + "/orders",
		Body: []byte(`{"amount":1999,"currency":"EUR"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.State, res.ResourceID)
	fmt.Println("orders on the server:", srv.Stats().SideEffects)
	// Output:
	// succeeded ord_000001
	// orders on the server: 1
}

// A process journals an order and dies before sending it. The next process
// resumes it at start-up with the same key and the same bytes.
func ExampleClient_Resume() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders.journal")
	ctx := context.Background()
	opts := []idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithResultEndpoint(srv.ResultTemplate())}

	first, _ := idem.Open(path, opts...)
	op, _ := first.Prepare(ctx, idem.Request{Key: "order-7", URL: srv.URL + "/orders", Body: []byte(`{"amount":500}`)})
	fmt.Println("before the crash:", op.State)
	first.Close() // the process stops here

	second, _ := idem.Open(path, opts...)
	defer second.Close()
	sum, _ := second.Resume(ctx)
	fmt.Printf("resumed %d: %d succeeded\n", sum.Visited, sum.Succeeded)
	fmt.Println("orders on the server:", srv.Stats().SideEffects)
	// Output:
	// before the crash: pending
	// resumed 1: 1 succeeded
	// orders on the server: 1
}

// When the budget runs out the outcome is unknown, not failed: the
// operation stays journaled and must not be retried under a new key.
func ExampleErrUnknownOutcome() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)

	c, _ := idem.Open(filepath.Join(dir, "orders.journal"),
		idem.WithHTTPClient(srv.Client()),
		idem.WithClock(idemtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))),
		idem.WithMaxElapsed(10*time.Second))
	defer c.Close()

	// The server asks for a minute's patience; the caller has ten seconds.
	if err := srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, RetryAfter: time.Minute}); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Submit(context.Background(), idem.Request{Key: "order-9", URL: srv.URL + "/orders", Body: []byte(`{}`)})
	if errors.Is(err, idem.ErrUnknownOutcome) {
		fmt.Println(res.State, "- left to the reconciler, due", res.Key)
	}
	// Output:
	// unknown - left to the reconciler, due order-9
}

// A service stopping: Shutdown refuses new calls, lets the ones in flight
// finish (here, until a grace period ends), then closes the journal.
func ExampleClient_Shutdown() {
	srv, err := idemtest.NewServer()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)

	c, err := idem.Open(filepath.Join(dir, "orders.journal"),
		idem.WithHTTPClient(srv.Client()),
		idem.WithResultEndpoint(srv.ResultTemplate()))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Submit(context.Background(), idem.Request{
		Key: "order-7", URL: srv.URL + "/orders", Body: []byte(`{"amount":700}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.State)

	grace, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Shutdown(grace); err != nil {
		fmt.Println("shutdown:", err)
	}
	_, err = c.Submit(context.Background(), idem.Request{
		Key: "order-8", URL: srv.URL + "/orders", Body: []byte(`{"amount":800}`),
	})
	fmt.Println(errors.Is(err, idem.ErrClosed))
	// Output:
	// succeeded
	// true
}
