package groupcommit

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type req struct {
	Slot
	id       int
	answered string
}

// held is a Queue whose Commit records each round's ids and answers
// every request, after calling each (if set) with it; while gate is set,
// the first round waits on it.
type held struct {
	q      Queue[*req]
	each   func(*req)
	mu     sync.Mutex
	rounds [][]int
	gate   chan struct{}
	in     chan struct{} // closed when the gated round has begun
}

func newHeld(limit int) *held {
	h := &held{gate: make(chan struct{}), in: make(chan struct{})}
	h.q = Queue[*req]{Max: limit, Name: "test", Commit: func(round []*req) {
		if h.gate != nil {
			close(h.in)
			<-h.gate
			h.gate = nil
		}
		var ids []int
		for _, r := range round {
			if h.each != nil {
				h.each(r)
			}
			ids = append(ids, r.id)
			r.answered = "committed"
			r.Release()
		}
		h.mu.Lock()
		h.rounds = append(h.rounds, ids)
		h.mu.Unlock()
	}, Abandon: func(r *req) {
		r.answered = "abandoned"
		r.Release()
	}}
	return h
}

// queue starts writers with ids, one after the other, each queued before
// the next starts.
func (h *held) queue(t *testing.T, wg *sync.WaitGroup, ids ...int) []*req {
	t.Helper()
	var out []*req
	for _, id := range ids {
		r := &req{id: id}
		out = append(out, r)
		n := h.q.Len()
		wg.Go(func() { require.True(t, h.q.Do(r)) })
		require.Eventually(t, func() bool { return h.q.Len() == n+1 }, 5*time.Second, time.Millisecond, "writer %d queued", id)
	}
	return out
}

func TestLoneWriterCommitsAtOnce(t *testing.T) {
	h := newHeld(0)
	h.gate = nil
	r := &req{id: 1}
	require.True(t, h.q.Do(r), "Do()")
	require.Equal(t, "committed", r.answered)
	require.Equal(t, [][]int{{1}}, h.rounds, "rounds")
}

func TestQueuedWritersShareRounds(t *testing.T) {
	for _, tt := range []struct {
		name  string
		limit int
		want  [][]int
	}{
		{"one round", 0, [][]int{{0}, {1, 2, 3, 4, 5}}},
		{"rounds of at most 2", 2, [][]int{{0}, {1, 2}, {3, 4}, {5}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeld(tt.limit)
			var wg sync.WaitGroup
			first := &req{id: 0}
			wg.Go(func() { h.q.Do(first) })
			<-h.in
			reqs := h.queue(t, &wg, 1, 2, 3, 4, 5)
			close(h.gate)
			wg.Wait()
			require.Equal(t, tt.want, h.rounds, "rounds")
			for _, r := range reqs {
				require.Equal(t, "committed", r.answered, "request %d", r.id)
			}
		})
	}
}

func TestStop(t *testing.T) {
	h := newHeld(0)
	var wg sync.WaitGroup
	wg.Go(func() { h.q.Do(&req{id: 0}) })
	<-h.in
	reqs := h.queue(t, &wg, 1, 2)
	stopped := make(chan struct{})
	go func() {
		h.q.Stop()
		close(stopped)
	}()
	require.Eventually(t, func() bool {
		h.q.mu.Lock()
		defer h.q.mu.Unlock()
		return h.q.closed
	}, 5*time.Second, time.Millisecond, "Stop() called")
	require.False(t, h.q.Do(&req{id: 3}), "Do() after Stop()")
	select {
	case <-stopped:
		t.Fatal("Stop() returned while writes were queued")
	default:
	}
	close(h.gate)
	<-stopped
	wg.Wait()
	for _, r := range reqs {
		require.Equal(t, "committed", r.answered, "request %d queued before Stop()", r.id)
	}
}

// A caller's function that calls runtime.Goexit on the leader's goroutine:
// the round's unanswered requests are abandoned, and the next round runs.
func TestGoexitInRound(t *testing.T) {
	h := newHeld(0)
	h.each = func(r *req) {
		if r.id == 2 {
			runtime.Goexit()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { h.q.Do(&req{id: 0}) })
	<-h.in
	reqs := h.queue(t, &wg, 1, 2, 3)
	close(h.gate)
	wg.Wait()
	require.Equal(t, "committed", reqs[0].answered, "request answered before the exit")
	require.Equal(t, "abandoned", reqs[1].answered, "request whose function exited")
	require.Equal(t, "abandoned", reqs[2].answered, "request after the exit")
	after := &req{id: 4}
	require.True(t, h.q.Do(after), "Do() after the exit")
	require.Equal(t, "committed", after.answered, "request after the exit's round")
}
