package journal

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/owned"
)

// TestAdoptedRecordIsTheClients: a client-owned create hands back the
// client's record itself, unmarked and in stored form, not a copy: an
// owned Create allocates twice (3 before, and 4 before its record key was
// the op's own: TestCreateKeysItsOverlayEntryWithTheOpsBytes). What is
// journaled is that record, as Get reads it back, of no, one or two
// attempts. A record whose header asStored would replace (none at all: a
// capture's body-less POST) is still copied, its header read by a
// goroutine meanwhile (a joiner's sameRequest; -race sees a write).
func TestAdoptedRecordIsTheClients(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	s := ownedTestStore(t)
	ownedCreates(t, s, "a", 1)

	for _, n := range []int{0, 1, 2} {
		mine := ownedTestRecord(fmt.Sprint("n", n))
		mine.Created = time.Now() // a monotonic reading, as the client's clock gives
		for j := range n {
			mine.Attempts = append(mine.Attempts, Attempt{Number: j + 1, Kind: AttemptSubmit, Start: start})
		}
		owned.Mark(mine)
		stored, err := s.Create(ctx, mine)
		require.NoError(t, err)
		require.Same(t, mine, stored, "%d attempts: the client's record handed back", n)
		require.False(t, stored.clientOwned(), "%d attempts: unmarked", n)
		require.Equal(t, stored.Created, stored.Created.UTC(), "%d attempts: stored form", n)
		got, err := s.Get(ctx, "s", mine.Key)
		require.NoError(t, err)
		require.Equal(t, got, stored, "%d attempts: Create's record and Get's", n)
	}

	bare := ownedTestRecord("bare")
	bare.Header, bare.Body, bare.BodySHA = map[string][]string{}, nil, sha256.Sum256(nil)
	owned.Mark(bare)
	read := make(chan int)
	go func() { read <- len(bare.Header) }()
	stored, err := s.Create(ctx, bare)
	require.NoError(t, err)
	require.Zero(t, <-read)
	require.NotSame(t, bare, stored, "a header decode would not give: copied")
	require.NotNil(t, bare.Header, "the client's header map, as it was")
	require.Nil(t, stored.Header, "the copy's, in stored form")
	got, err := s.Get(ctx, "s", "bare")
	require.NoError(t, err)
	require.Equal(t, got, stored)
}
