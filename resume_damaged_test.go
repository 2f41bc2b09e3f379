package idem_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

// lowerDueLeafCount halves the element count of the first leaf of the due
// index of the journal at path (which nothing holds open), as a damaged
// disk block would: the page still looks sound to bbolt, whose cursor
// then walks past the entries it no longer counts.
func lowerDueLeafCount(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	var root uint64
	var pageSize int
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("due.seq")).Root())
		pageSize = tx.DB().Info().PageSize
		return nil
	}))
	require.NoError(t, db.Close())
	require.NotZero(t, root, "the due index is inline: prepare more operations")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	off := int(root) * pageSize
	for binary.LittleEndian.Uint16(data[off+8:off+10])&0x01 != 0 { // branch: its first child
		off = int(binary.LittleEndian.Uint64(data[off+16+8:off+16+16])) * pageSize
	}
	n := binary.LittleEndian.Uint16(data[off+10 : off+12])
	binary.LittleEndian.PutUint16(data[off+10:off+12], n/2)
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// TestResumeOnDamagedDueIndex: a lost operation. Resume and Run read the
// open operations through the journal's due index; a damaged page of it
// that still looked sound to bbolt (its element count lowered) made them
// skip the operations it no longer counted, without an error: Resume
// reported success having visited only some, and those left out were
// never sent nor settled. Both must fail with the journal's ErrCorrupt,
// sending nothing, so that the operator restores the journal.
func TestResumeOnDamagedDueIndex(t *testing.T) {
	const n = 400 // enough for the due index to span several pages
	e := newEnv(t)
	for i := range n {
		_, err := e.client.Prepare(e.ctx, e.req(fmt.Sprintf("k%04d", i), `{"amount":42}`))
		require.NoError(t, err)
	}
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())
	lowerDueLeafCount(t, e.path)
	e.open()

	sum, err := e.client.Resume(e.ctx)
	require.ErrorIs(t, err, journal.ErrCorrupt, "Resume on a damaged due index (summary %+v)", sum)
	require.Equal(t, 0, sum.Visited, "operations Resume visited")

	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	err = e.client.Run(ctx)
	require.ErrorIs(t, err, journal.ErrCorrupt, "Run on a damaged due index")
	require.Empty(t, e.srv.Requests(), "requests sent from a damaged journal")
}
