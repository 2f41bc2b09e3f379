package idemotel_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// Run serves for the life of the process, and a service often starts it
// inside a start-up span (an OpenTelemetry-instrumented main, a
// framework's lifecycle hook). Each Run visit drives an operation some
// earlier request journaled: it must be its own trace, linked to that
// request's (here the start-up span itself), never a child of the start-up span, which would gather every
// operation the process ever reconciles into one unrelated trace.
func TestRunVisitsAreNotChildrenOfRunsContext(t *testing.T) {
	f := newFakeAPI(t)
	clk, tel, srv := f.clk, f.tel, f.srv
	startup, span := tel.tp.Tracer("app").Start(context.Background(), "startup")
	defer span.End()
	// Journaled at start-up (an outbox's first send) by a process that
	// stopped before sending it.
	body := []byte(`{}`)
	now := clk.Now()
	_, err := f.store.Create(context.Background(), &journal.Record{
		Scope: idem.DefaultScope, Key: "left-over", Method: http.MethodPost, URL: srv.URL + "/orders",
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StatePending, Created: now, Updated: now, NextDue: now,
		Trace: tel.inst.Hooks().Trace(startup),
	})
	require.NoError(t, err)
	c := f.client(t)

	rctx, cancel := context.WithTimeout(startup, 20*time.Second)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(rctx) }()
	require.Eventually(t, func() bool {
		op, err := c.Lookup(context.Background(), "", "left-over")
		return err == nil && op.State == idem.StateSucceeded
	}, 15*time.Second, time.Millisecond)
	cancel()
	<-done

	require.Len(t, srv.Requests(), 1)
	visits := 0
	for _, s := range tel.spans.Ended() {
		if s.Name() != "idem reconcile" && s.Name() != "idem resume" {
			continue
		}
		visits++
		require.NotEqual(t, span.SpanContext().TraceID(), s.SpanContext().TraceID(), "visit %s joined Run's start-up trace", s.Name())
		require.Len(t, s.Links(), 1, "the visit links to the trace that journaled the operation")
		require.Equal(t, span.SpanContext().SpanID(), s.Links()[0].SpanContext.SpanID())
	}
	require.Equal(t, 1, visits)
}
