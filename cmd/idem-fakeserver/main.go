// Command idem-fakeserver runs the fake idempotent payment API of
// github.com/idemkit/idem as a process, for crash tests, demos and tests
// written in other languages.
//
// It listens on 127.0.0.1 (a random port by default), prints exactly one
// line to stdout,
//
//	idem-fakeserver listening on http://127.0.0.1:PORT
//
// and serves until SIGINT or SIGTERM, then shuts down gracefully. -behavior
// picks how it answers a key it has seen, modelling a kind of real
// Idempotency-Key middleware (ietf-draft, stored-errors, no-body-compare,
// conflict-417, short-window) or an order API whose key is a client order
// id in the body, which refuses a repeated id (client-order-id). Every fault
// can be switched on with a probability per submit; a test can also script
// faults over HTTP (POST /_faults). Run it with -h for the flags and the
// faults.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, serves until ctx is done and returns the exit code: 0 on
// success or -h, 2 for bad flags (including a configuration the server
// refuses), 1 when serving fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "idem-fakeserver: %v (see -h)\n", err)
		return 2
	}
	srv, err := fakeserver.New(opts.cfg)
	if err != nil {
		// The cause, without the "fakeserver: New: " prefix, names the
		// setting to change.
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		fmt.Fprintf(stderr, "idem-fakeserver: %v (see -h)\n", err)
		return 2
	}
	defer srv.Close() // webhook deliveries, after the last request
	if err := serve(ctx, opts.addr, srv, stdout); err != nil {
		fmt.Fprintf(stderr, "idem-fakeserver: %v\n", err)
		return 1
	}
	return 0
}

// serve listens on addr, prints the URL and serves h until ctx is done.
func serve(ctx context.Context, addr string, h http.Handler, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// Request contexts derive from base: cancelling it at shutdown ends
	// delay faults, so shutdown does not wait for them.
	base, cancelBase := context.WithCancelCause(context.Background())
	defer cancelBase(fakeserver.ErrClosing)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "idem-fakeserver listening on http://%s\n", ln.Addr())

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// With ErrClosing the held answers are sent, as to a client still
	// waiting, not taken for a client gone.
	cancelBase(fakeserver.ErrClosing)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc // http.ErrServerClosed
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
