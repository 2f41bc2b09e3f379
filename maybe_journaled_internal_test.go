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
		m.add(opID{"s", strconv.Itoa(i)})
	}
	require.Len(t, m.keys, maxMaybeJournaled)
	last := opID{"s", strconv.Itoa(maxMaybeJournaled + 9)}
	require.True(t, m.has(last), "the newest key")
	m.forget(last)
	require.False(t, m.has(last), "a key forgotten")
	require.EqualValues(t, maxMaybeJournaled-1, m.n.Load())
}
