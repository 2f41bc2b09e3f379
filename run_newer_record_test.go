package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal/journaltest"
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
	written := makeNewer(t, e.path, "done.seq", "newer")
	e.open()

	got := runUntilSettled(t, e, settled, keys)
	for _, k := range keys {
		require.Equal(t, idem.StateSucceeded, got[k], "operation %q", k)
		require.Equal(t, 1, e.srv.Effects(scope, k), "operation %q", k)
	}
	h := e.client.Health()
	require.NoError(t, h.LastJournalError, "the prune met no error")
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())
	require.Equal(t, written, storedRecord(t, e.path, "done.seq", "newer"), "the newer record untouched")
}

// makeNewer makes the record of key (in the default scope and the bucket
// named: open.seq or done.seq) of the closed journal at path one that a
// newer idem wrote, as a rollback leaves it: its record version byte
// above this build's. It returns the record's bytes.
func makeNewer(t *testing.T, path, bucket, key string) []byte {
	t.Helper()
	journaltest.MakeNewer(t, path, idem.DefaultScope, key)
	written := storedRecord(t, path, bucket, key)
	require.NotEmpty(t, written, "the record of %q in %s", key, bucket)
	return written
}

// storedRecord returns the bytes of the record of key, as makeNewer
// names it, in the closed journal at path.
func storedRecord(t *testing.T, path, bucket, key string) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	var v []byte
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		sk := tx.Bucket([]byte("keys")).Get([]byte(idem.DefaultScope + "\x00" + key))
		require.NotNil(t, sk, "the key index entry of %q", key)
		v = append([]byte(nil), tx.Bucket([]byte(bucket)).Get(sk)...)
		return nil
	}))
	return v
}

// runUntilSettled runs e's Client until settled has heard of every
// operation of keys, fails the test if Run ends first, and returns the
// states heard once Run has stopped.
func runUntilSettled(t *testing.T, e *env, settled <-chan *idem.Result, keys []string) map[string]idem.State {
	t.Helper()
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
	return got
}
