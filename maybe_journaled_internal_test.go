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
