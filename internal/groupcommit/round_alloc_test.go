package groupcommit

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoneWriterAllocatesNothing: a writer that finds no round in progress
// leads one at once and never waits on its slot, so it needs no channel,
// and its round's slice is the one the last round left: the journal's
// lone writer (every Create and Update with no company) allocates nothing
// in the queue.
func TestLoneWriterAllocatesNothing(t *testing.T) {
	rounds := 0
	q := Queue[*req]{Name: "test", Commit: func(round []*req) {
		for _, r := range round {
			r.Release()
		}
		rounds++
	}}
	r := &req{id: 1}
	require.True(t, q.Do(r), "Do()") // the first round makes the slice
	allocs := testing.AllocsPerRun(100, func() {
		if !q.Do(r) {
			t.Fatal("Do() false")
		}
	})
	require.Zero(t, allocs, "allocations per lone Do")
	require.Equal(t, 102, rounds, "rounds") // AllocsPerRun's warm-up run too
	require.True(t, r.Released(), "released")
	require.Nil(t, r.done, "a lone writer's done channel")
}

// TestReusedRoundSliceHoldsNothingOfAnEndedRound: rounds of 1, 3, 3 and 1
// requests share one slice, each seeing only its own requests, in queue
// order; once a round is over the kept slice points at none of its
// requests (the Queue would keep them from the garbage collector).
func TestReusedRoundSliceHoldsNothingOfAnEndedRound(t *testing.T) {
	h := newHeld(3)
	var wg sync.WaitGroup
	first := &req{id: 0}
	wg.Go(func() { h.q.Do(first) })
	<-h.in
	reqs := h.queue(t, &wg, 1, 2, 3, 4, 5, 6)
	close(h.gate)
	wg.Wait()
	require.Equal(t, [][]int{{0}, {1, 2, 3}, {4, 5, 6}}, h.rounds, "rounds")
	r := &req{id: 7}
	require.True(t, h.q.Do(r), "Do()")
	require.Equal(t, [][]int{{0}, {1, 2, 3}, {4, 5, 6}, {7}}, h.rounds, "rounds")
	for _, r := range append(reqs, first, r) {
		require.Equal(t, "committed", r.answered, "request %d", r.id)
	}
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	require.Empty(t, h.q.spare, "the kept slice's length")
	require.GreaterOrEqual(t, cap(h.q.spare), 3, "the kept slice: the rounds' own")
	for i, r := range h.q.spare[:cap(h.q.spare)] {
		require.Nil(t, r, "the kept slice's element %d", i)
	}
}
