package journal_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestDamagedKeyOrderHidesNoKey: the worst bug there is, from damage that
// leaves every offset on its page. A bad byte inside a key of the key
// index (found by TestFlippedBytesNeverCrashWrites) can put it out of
// order with its neighbours: bbolt's binary search, comparing the key
// sought with it, turns the wrong way and misses keys the page holds.
// vetMiss checked only that the keys it probes lie on their page, so it
// confirmed the miss: Get said ErrNotFound, and Create journaled a second
// record for an operation already taken on. Here the middle key of the
// key index's first leaf, the first every search of that page probes, is
// made greater than every key: each key above it was hidden.
func TestDamagedKeyOrderHidesNoKey(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	path := settledJournal(t, 3000)
	var n int
	damageFirstLeaf(t, path, "keys", func(data []byte, off, pageSize int) []byte {
		p := data[off : off+pageSize]
		n = int(binary.LittleEndian.Uint16(p[10:12]))
		e := 16 + 16*(n/2) // leaf element: flags, pos, ksize, vsize
		pos := e + int(binary.LittleEndian.Uint32(p[e+4:e+8]))
		k := p[pos : pos+int(binary.LittleEndian.Uint32(p[e+8:e+12]))]
		for i := len("acct\x00"); i < len(k); i++ {
			k[i] = 0xff
		}
		return data
	})

	s, err := journal.Open(path)
	require.NoError(t, err)
	defer s.Close()
	for i := range n { // the page's keys: k00000 … k{n-1}
		if i == n/2 {
			continue // the damaged key itself is gone
		}
		key := fmt.Sprintf("k%05d", i)
		_, err := s.Get(ctx, "acct", key)
		if err != nil {
			require.ErrorIs(t, err, journal.ErrCorrupt, "Get(%s), a key on the damaged page", key)
		}
		_, err = s.Create(ctx, journaltest.NewRecord("acct", key, at))
		require.True(t, errors.Is(err, journal.ErrExists) || errors.Is(err, journal.ErrCorrupt),
			"Create(%s), a key on the damaged page: %v", key, err)
	}
}
