package groupcommit

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQueuedWriterLeavesAtDeadline: a writer whose context ends while its
// request waits behind a round that does not finish leaves the queue at
// once, with its context's error; its request is never run, and the
// rounds after carry the others.
func TestQueuedWriterLeavesAtDeadline(t *testing.T) {
	h := newHeld(0)
	var wg sync.WaitGroup
	wg.Go(func() { h.q.Do(&req{id: 0}) })
	<-h.in
	reqs := h.queue(t, &wg, 1)
	ctx, cancel := context.WithCancel(context.Background())
	leaving := &req{id: 2}
	left := make(chan error, 1)
	go func() { left <- h.q.DoContext(ctx, leaving) }()
	require.Eventually(t, func() bool { return h.q.Len() == 2 }, 5*time.Second, time.Millisecond, "writer 2 queued")
	reqs = append(reqs, h.queue(t, &wg, 3)...)

	cancel()
	select {
	case err := <-left:
		require.ErrorIs(t, err, context.Canceled, "DoContext() of a writer whose context ended while queued")
	case <-time.After(5 * time.Second):
		t.Fatal("a queued writer whose context ended still waits for the round ahead")
	}
	require.Equal(t, 2, h.q.Len(), "writers still queued")
	close(h.gate)
	wg.Wait()
	require.Equal(t, [][]int{{0}, {1, 3}}, h.rounds, "rounds")
	require.Empty(t, leaving.answered, "the request of the writer that left")
	for _, r := range reqs {
		require.Equal(t, "committed", r.answered, "request %d", r.id)
	}
}

// TestEndedWriterHandsLeadOn: a writer handed the lead after its context
// ended does not lead a round of the others' requests: it leaves, and the
// next queued writer leads.
func TestEndedWriterHandsLeadOn(t *testing.T) {
	h := newHeld(0)
	h.gate = nil
	// The state a round leaves when it hands the lead to a writer that is
	// queued first: busy, the writer at the head, its done channel open.
	first := &req{id: 1}
	first.done = make(chan struct{})
	h.q.mu.Lock()
	h.q.busy = true
	h.q.queue = append(h.q.queue, first)
	h.q.mu.Unlock()
	var wg sync.WaitGroup
	second := h.queue(t, &wg, 2)[0]
	h.q.mu.Lock()
	h.q.handOffLocked()
	require.True(t, first.lead, "the head of the queue was handed the lead")
	require.True(t, h.q.leave(&first.Slot), "leave() of a writer handed the lead")
	wg.Wait()
	require.Equal(t, [][]int{{2}}, h.rounds, "rounds")
	require.Empty(t, first.answered, "the request of the writer that left")
	require.Equal(t, "committed", second.answered)
	require.Zero(t, h.q.Len(), "writers queued")
	h.q.mu.Lock()
	require.False(t, h.q.busy, "busy after the last round")
	h.q.mu.Unlock()
}

// TestDeadlinesRace: writers whose contexts end at random moments, while
// rounds run: each request is either run once and DoContext returns nil,
// or never run and DoContext returns its context's error; none waits for
// ever, and the queue is idle at the end.
func TestDeadlinesRace(t *testing.T) {
	h := newHeld(3)
	h.gate = nil
	var mu sync.Mutex
	runs := make(map[int]int)
	h.each = func(r *req) {
		mu.Lock()
		runs[r.id]++
		mu.Unlock()
		runtime.Gosched() // let queued writers' deadlines pass meanwhile
	}
	const writers = 200
	errs := make([]error, writers)
	reqs := make([]*req, writers)
	var wg sync.WaitGroup
	for i := range writers {
		reqs[i] = &req{id: i}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(1000))*time.Microsecond)
			defer cancel()
			errs[i] = h.q.DoContext(ctx, reqs[i])
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writers still waiting")
	}
	left := 0
	for i, r := range reqs {
		if errs[i] != nil {
			left++
		}
		if errs[i] == nil {
			require.Equal(t, "committed", r.answered, "request %d", i)
			require.Equal(t, 1, runs[i], "runs of request %d", i)
		} else {
			require.ErrorIs(t, errs[i], context.DeadlineExceeded, "request %d", i)
			require.Empty(t, r.answered, "request %d whose writer left", i)
			require.Zero(t, runs[i], "runs of request %d whose writer left", i)
		}
	}
	t.Logf("%d of %d writers left the queue", left, writers)
	require.Zero(t, h.q.Len(), "writers queued")
	h.q.mu.Lock()
	require.False(t, h.q.busy, "busy after the last round")
	h.q.mu.Unlock()
}
