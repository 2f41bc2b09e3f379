package idem_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestNilOptionIsSkipped: New and Open applied every Option without
// looking, so a nil one (an option chosen by a condition, left unset)
// panicked inside New. journal.Open, idemtest.NewServer and pgjournal skip
// a nil Option; so does idem now.
func TestNilOptionIsSkipped(t *testing.T) {
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })

	var opt idem.Option // left nil
	var c *idem.Client
	require.NotPanics(t, func() { c, err = idem.New(store, opt, idem.WithScope("shop")) })
	require.NoError(t, err)
	require.NoError(t, c.Close())

	require.NotPanics(t, func() { c, err = idem.Open(filepath.Join(t.TempDir(), "idem.journal"), nil) })
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// clientCalls calls every method of c that takes a context, with ctx, and
// returns what each returned; a panic is reported as an error naming it.
func clientCalls(c *idem.Client, ctx context.Context, url string) map[string]error {
	out := make(map[string]error)
	call := func(name string, f func() error) {
		defer func() {
			if r := recover(); r != nil {
				out[name] = fmt.Errorf("PANIC: %v", r)
			}
		}()
		out[name] = f()
	}
	req := idem.Request{Key: "k1", URL: url, Body: []byte(`{"amount":1}`)}
	call("Prepare", func() error { _, err := c.Prepare(ctx, req); return err })
	call("PrepareIn", func() error {
		_, err := c.PrepareIn(ctx, req, func(context.Context, *journal.Record) (*journal.Record, error) {
			return nil, errors.New("create must not be called")
		})
		return err
	})
	call("Submit", func() error { _, err := c.Submit(ctx, req); return err })
	call("Do", func() error { _, err := c.Do(ctx, &idem.Operation{Scope: "default", Key: "k1"}); return err })
	call("Lookup", func() error { _, err := c.Lookup(ctx, "", "k1"); return err })
	call("Record", func() error { _, err := c.Record(ctx, "", "k1"); return err })
	call("LookupResource", func() error { _, err := c.LookupResource(ctx, "", "ord_1"); return err })
	call("List", func() error { _, err := c.List(ctx, idem.Filter{}); return err })
	call("Stats", func() error { _, err := c.Stats(ctx); return err })
	call("Prune", func() error { _, err := c.Prune(ctx); return err })
	call("Wait", func() error { _, err := c.Wait(ctx, "", "k1"); return err })
	call("Resume", func() error { _, err := c.Resume(ctx); return err })
	call("Run", func() error { return c.Run(ctx) })
	call("Resolve", func() error {
		_, err := c.Resolve(ctx, "", "k1", idem.Resolution{State: idem.StateFailed, Reason: "abandoned", By: "ops"})
		return err
	})
	call("Confirm", func() error {
		_, err := c.Confirm(ctx, "", "k1", idem.Confirmation{State: idem.StateFailed, Source: "hook", EventID: "evt_1"})
		return err
	})
	call("Shutdown", func() error { return c.Shutdown(ctx) })
	call("Close", func() error { return c.Close() })
	call("Close again", func() error { return c.Close() })
	return out
}

// runBounded runs f on its own goroutine and fails t if it does not
// return within a few seconds: a zero Client's Close used to panic with
// its lock held, and every later call then hung on that lock.
func runBounded(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("calls did not return within a minute")
	}
}

// TestUnmadeClientRefusesEveryCall: a zero Client (idem.Client{}) or a
// nil *Client (Open's result used after its error was ignored) panicked
// on every call, a zero one's Close with its lock held so that the next
// call hung for ever. Each call now returns an error that says to make
// the Client with New or Open.
func TestUnmadeClientRefusesEveryCall(t *testing.T) {
	for name, c := range map[string]*idem.Client{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			var got map[string]error
			runBounded(t, func() { got = clientCalls(c, context.Background(), "http://127.0.0.1:1/orders") })
			for call, err := range got {
				require.Error(t, err, "%s on a %s Client", call, name)
				require.NotContains(t, err.Error(), "PANIC", "%s on a %s Client", call, name)
				require.Contains(t, err.Error(), "idem.Open or idem.New", "%s on a %s Client", call, name)
			}
		})
	}
}

// TestNilContextRefused: a nil context panicked in every call that takes
// one (context.WithCancelCause(nil), or ctx.Done() in the journal), and
// left a zero-value Shutdown stuck. Each call now returns an error
// matching ErrInvalidRequest that says what to pass, journals nothing and
// sends nothing; Shutdown(nil) still closes the Client, as Close does.
func TestNilContextRefused(t *testing.T) {
	e := newEnv(t)
	var nilCtx context.Context
	var got map[string]error
	runBounded(t, func() { got = clientCalls(e.client, nilCtx, e.srv.URL+"/orders") })
	for call, err := range got {
		switch call {
		case "Close", "Close again":
			require.NoError(t, err, call)
			continue
		}
		require.Error(t, err, call)
		require.NotContains(t, err.Error(), "PANIC", call)
		require.ErrorIs(t, err, idem.ErrInvalidRequest, call)
		require.Contains(t, err.Error(), "context.Background()", call)
	}
	_, err := e.store.Get(context.Background(), idem.DefaultScope, "k1")
	require.ErrorIs(t, err, journal.ErrNotFound, "a call with a nil context journaled the operation")
	require.Empty(t, e.srv.Requests(), "a call with a nil context sent a request")
	// Shutdown(nil) closed the Client: later calls are refused as closed.
	_, err = e.client.Submit(context.Background(), e.req("k2", `{}`))
	require.ErrorIs(t, err, idem.ErrClosed)
}

// TestDoHandBuiltOperation: Do of an Operation built by hand with a Key
// but no Scope failed with the journal's "claim: get: empty scope: invalid
// record", where Lookup, Wait, Resolve and Confirm take an empty scope as
// the client's default. It now drives the default scope's operation; an
// Operation without a Key is refused, saying where to get one.
func TestDoHandBuiltOperation(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Prepare(e.ctx, e.req("draft-7", `{"amount":7}`))
	require.NoError(t, err)

	res, err := e.client.Do(e.ctx, &idem.Operation{Key: "draft-7"})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Len(t, e.submits("draft-7"), 1, "submits for draft-7")
	require.Equal(t, idem.StateSucceeded, e.record("draft-7").State)

	_, err = e.client.Do(e.ctx, &idem.Operation{})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.Contains(t, err.Error(), "Key")
	require.True(t, strings.Contains(err.Error(), "Prepare") && strings.Contains(err.Error(), "Lookup"), "Do(&Operation{}) = %v; want it to name Prepare and Lookup", err)
}

// TestNilClientHealth: Health, "safe to call at any time", panicked on a
// nil *Client (an admin handler or probe given Open's result after its
// error). It should report the Client unusable instead.
func TestNilClientHealth(t *testing.T) {
	var c *idem.Client
	var h idem.Health
	require.NotPanics(t, func() { h = c.Health() })
	require.Error(t, h.RunErr)
	require.Contains(t, h.RunErr.Error(), "idem.Open or idem.New")
}
