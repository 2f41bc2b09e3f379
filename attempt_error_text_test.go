package idem_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A transport error names the URL net/http sent, which idem replaces by
// the journaled one: for an operation journaled by a release that still
// accepted a credential in its URL (apilayer's ?access_key=, finished
// after the upgrade rather than stranded), that put the key in the debug
// log and in every AttemptEvent.Err a service's hook logs, where the
// admin handler, the idem command and CallEvent show it redacted.
func TestTransportErrorOfALegacyRecordHoldsNoCredential(t *testing.T) {
	var logs syncBuffer
	var mu sync.Mutex
	var errs []string
	e := newEnv(t, script(step{err: dialRefused}), clientOpts(
		idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
			if ev.Err != nil {
				mu.Lock()
				errs = append(errs, ev.Err.Error())
				mu.Unlock()
			}
		}})))
	journalLegacy(t, e, "?currency=EUR&access_key=LEGACY_SECRET", nil)
	finishJournaledOnce(t, e, "resume", idem.Request{})

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, errs, "the refused dial's attempt")
	for _, s := range errs {
		require.Contains(t, s, "access_key=REDACTED", "the URL is still named")
		require.NotContains(t, s, "LEGACY_SECRET", "AttemptEvent.Err")
	}
	require.Contains(t, logs.String(), "idem: attempt")
	require.NotContains(t, logs.String(), "LEGACY_SECRET", "the debug log")
}

// A server that answers with no HTTP status line (another protocol on
// the port, a proxy's banner) has its whole line quoted by net/http's
// error ("malformed HTTP response %q"), up to MaxResponseHeaderBytes (10
// MiB): the journal keeps 512 bytes of it, but the debug log and the
// AttemptEvent.Err a service's hook logs carried all of it, each attempt.
func TestAttemptErrorTextIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	line := "\x1b]52;c;" + strings.Repeat("A", 256<<10) + "\r\n"
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				_ = req.Body.Close()
				_, _ = conn.Write([]byte(line))
			}()
		}
	}()
	var logs syncBuffer
	var mu sync.Mutex
	var errs []error
	c := journaledClient(t, idem.WithClock(idemtest.NewClock(epoch)),
		idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
			if ev.Err != nil {
				mu.Lock()
				errs = append(errs, ev.Err)
				mu.Unlock()
			}
		}}))
	_, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: "http://" + ln.Addr().String() + "/orders", Body: []byte(`{"n":1}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, errs)
	for _, e := range errs {
		require.LessOrEqual(t, len(e.Error()), 1024, "AttemptEvent.Err's text")
		require.Contains(t, e.Error(), "malformed HTTP response", "the failure is still named")
	}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		require.LessOrEqual(t, len(l), 4096, "a debug log line")
	}
}
