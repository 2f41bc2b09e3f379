package idem

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The keys a Client remembers as maybe journaled stay bounded however many
// creates lose their answers and are never retried, and a key a create
// got past the journal for is forgotten.
func TestMaybeJournaledBounded(t *testing.T) {
	var m maybeJournaled
	for i := range maxMaybeJournaled + 10 {
		m.add(opID{"s", strconv.Itoa(i)}, true)
	}
	require.Len(t, m.keys, maxMaybeJournaled)
	last := opID{"s", strconv.Itoa(maxMaybeJournaled + 9)}
	held, _ := m.has(last)
	require.True(t, held, "the newest key")
	m.forget(last)
	held, _ = m.has(last)
	require.False(t, held, "a key forgotten")
	require.EqualValues(t, maxMaybeJournaled-1, m.n.Load())
}

// A full set forgets its oldest key, an unknown outcome's before any lost
// commit's: a key whose create lost its commit answer, its retry seconds
// away, outlives the unknown outcomes of a set's worth of later calls
// (a random key forgotten instead told 1 retry in 64 "nothing was
// journaled" with 64 calls ending unknown before it).
func TestMaybeJournaledForgetsTheOldestUnknownFirst(t *testing.T) {
	var m maybeJournaled
	lost := opID{"s", "lost"}
	m.add(lost, true)
	for i := range maxMaybeJournaled + 100 {
		m.add(opID{"s", strconv.Itoa(i)}, false)
	}
	require.Len(t, m.keys, maxMaybeJournaled)
	held, lostCommit := m.has(lost)
	require.True(t, held, "the lost commit's key, older than every unknown outcome's")
	require.True(t, lostCommit)
	for i := range 101 {
		held, _ := m.has(opID{"s", strconv.Itoa(i)})
		require.False(t, held, "unknown outcome %d, among the oldest, is forgotten", i)
	}
	for i := 101; i < maxMaybeJournaled+100; i++ {
		held, _ := m.has(opID{"s", strconv.Itoa(i)})
		require.True(t, held, "unknown outcome %d, newer, is held", i)
	}

	// Every key a lost commit's: the oldest of them goes.
	var all maybeJournaled
	for i := range maxMaybeJournaled + 1 {
		all.add(opID{"s", strconv.Itoa(i)}, true)
	}
	held, _ = all.has(opID{"s", "0"})
	require.False(t, held, "the oldest lost commit")
	held, _ = all.has(opID{"s", "1"})
	require.True(t, held, "the next")
}
