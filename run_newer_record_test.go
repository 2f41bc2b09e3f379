package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem"
)

// TestRunOutlivesSettledRecordFromNewerIdem: after a rollback the journal
// holds a settled record the newer idem wrote in a record version this
// build does not read (this build's versions 4 and 5, written for certain
// confirmations, are such records to the build before it). Run's prune
// met it with ErrVersion, which Run takes for a journal it cannot use:
// Run stopped for good and the open operations stayed unsettled until a
// person upgraded again. The prune must keep that record, untouched, and
// Run settle the others.
func TestRunOutlivesSettledRecordFromNewerIdem(t *testing.T) {
	settled := make(chan *idem.Result, 8)
	e := newEnv(t, clientOpts(idem.WithSettleFunc(func(r *idem.Result) { settled <- r })))
	_, err := e.client.Submit(e.ctx, e.req("newer", `{"amount":1}`))
	require.NoError(t, err)
	// Past twice the retention: Run's first pass prunes it.
	e.clock.Advance(2*idem.DefaultRetainSettled + time.Hour)
	keys := []string{"k0", "k1", "k2"}
	for _, k := range keys {
		_, err := e.client.Prepare(e.ctx, e.req(k, `{"amount":42}`))
		require.NoError(t, err)
	}
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())

	// The newer idem's record: its version byte above this build's.
	var written []byte
	recordOf := func(tx *bolt.Tx) (sk []byte, b *bolt.Bucket) {
		sk = tx.Bucket([]byte("keys")).Get([]byte(idem.DefaultScope + "\x00newer"))
		return sk, tx.Bucket([]byte("done.seq"))
	}
	db, err := bolt.Open(e.path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		sk, done := recordOf(tx)
		written = append([]byte(nil), done.Get(sk)...)
		require.NotEmpty(t, written, "the settled record")
		written[2] = 6 // the record version: 5 is this build's newest
		return done.Put(sk, written)
	}))
	require.NoError(t, db.Close())
	e.open()

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ran := runAsync(ctx, e.client)
	got := map[string]idem.State{}
	timeout := time.After(30 * time.Second)
	for len(got) < len(keys) {
		select {
		case r := <-settled:
			got[r.Key] = r.State
		case err := <-ran:
			t.Fatalf("Run() = %v with %d of %d operations settled", err, len(got), len(keys))
		case <-timeout:
			t.Fatalf("%d of %d operations settled after 30s", len(got), len(keys))
		}
	}
	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
	for _, k := range keys {
		require.Equal(t, idem.StateSucceeded, got[k], "operation %q", k)
		require.Equal(t, 1, e.srv.Effects(scope, k), "operation %q", k)
	}
	h := e.client.Health()
	require.NoError(t, h.LastJournalError, "the prune met no error")
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())

	db, err = bolt.Open(e.path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		sk, done := recordOf(tx)
		require.NotNil(t, sk, "the newer record's key kept")
		require.Equal(t, written, done.Get(sk), "the newer record untouched")
		return nil
	}))
}
