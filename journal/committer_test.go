package journal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func counterDB(t testing.TB) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), 0o600, &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("c"))
		return err
	}))
	return db
}

// bump increments the counter and reports the value it saw.
func bump(saw *uint64) func(*bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("c"))
		if v := b.Get([]byte("n")); v != nil {
			*saw = binary.BigEndian.Uint64(v)
		}
		return failed(b.Put([]byte("n"), binary.BigEndian.AppendUint64(nil, *saw+1)))
	}
}

func TestCommitterRoundIsolation(t *testing.T) {
	db := counterDB(t)
	c := &committer{db: db}
	var saw1, saw3, saw5 uint64
	fnErr, boltErr := errors.New("fn failed"), errors.New("bbolt broke")
	round := []*request{
		{run: bump(&saw1)},
		{run: func(*bolt.Tx) error { return fnErr }},
		{run: bump(&saw3)}, // same record: sees the first request's write
		{run: func(tx *bolt.Tx) error {
			if err := tx.Bucket([]byte("c")).Put([]byte("x"), []byte("partial")); err != nil {
				return failed(err)
			}
			return failed(boltErr) // the transaction now holds half a write
		}},
		{run: bump(&saw5)},
	}
	for _, r := range round {
		r.done = make(chan struct{})
	}
	c.commit(round)
	for i, r := range round {
		select {
		case <-r.done:
		default:
			t.Fatalf("request %d not released", i)
		}
	}
	require.NoError(t, round[0].err)
	require.ErrorIs(t, round[1].err, fnErr)
	require.NoError(t, round[2].err)
	require.Equal(t, boltErr, round[3].err, "the culprit gets bbolt's error, unwrapped")
	require.NoError(t, round[4].err)
	require.Equal(t, uint64(0), saw1)
	require.Equal(t, uint64(1), saw3, "second write to a record sees the first")
	require.Equal(t, uint64(2), saw5)
	require.Equal(t, int64(2), c.rounds.Load(), "rounds: the failed one and its retry")
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("c"))
		require.Equal(t, uint64(3), binary.BigEndian.Uint64(b.Get([]byte("n"))), "counter")
		require.Nil(t, b.Get([]byte("x")), "the culprit's partial write")
		return nil
	}))
}

func TestCommitterSharesCommits(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"))
	require.NoError(t, err)
	defer s.Close()
	const writers, each = 64, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				body := []byte("b")
				_, err := s.Create(context.Background(), &Record{
					Scope: "s", Key: fmt.Sprintf("%d-%d", w, i), State: StatePending,
					Body: body, BodySHA: sha256.Sum256(body),
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	rounds := s.c.rounds.Load()
	t.Logf("%d writes in %d commits", writers*each, rounds)
	require.Less(t, rounds, int64(writers*each/2), "concurrent writers share commits")
}

func TestCloseDrainsQueuedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	const n = 200
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Go(func() {
			body := []byte("b")
			_, results[i] = s.Create(context.Background(), &Record{
				Scope: "s", Key: fmt.Sprint(i), State: StatePending, Body: body, BodySHA: sha256.Sum256(body),
			})
		})
	}
	require.NoError(t, s.Close())
	wg.Wait()
	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	for i, err := range results {
		_, gerr := s.Get(context.Background(), "s", fmt.Sprint(i))
		if err == nil {
			require.NoError(t, gerr, "acknowledged write %d lost by Close", i)
		} else {
			require.ErrorIs(t, err, ErrClosed, "write %d", i)
			require.ErrorIs(t, gerr, ErrNotFound, "write %d refused but stored", i)
		}
	}
}

func TestDamagedRecord(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	body := []byte("b")
	for _, k := range []string{"garbage", "future"} {
		_, err := s.Create(ctx, &Record{Scope: "s", Key: k, State: StatePending, Body: body, BodySHA: sha256.Sum256(body)})
		require.NoError(t, err)
	}
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOpen)
		v := append([]byte(nil), b.Get(recordKey("s", "future"))...)
		v[2] = formatVersion + 1
		return errors.Join(b.Put(recordKey("s", "garbage"), []byte("not a record")), b.Put(recordKey("s", "future"), v))
	}))
	_, err = s.Get(ctx, "s", "garbage")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = s.Get(ctx, "s", "future")
	require.ErrorIs(t, err, ErrVersion)
	_, err = s.Update(ctx, "s", "garbage", func(*Record) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = s.List(ctx, Filter{})
	require.ErrorIs(t, err, ErrVersion, "List() meets the future record first")
	_, err = s.List(ctx, Filter{States: []State{StatePending}})
	require.ErrorIs(t, err, ErrVersion, "List() through the open index")
	_, err = s.Stats(ctx)
	require.ErrorIs(t, err, ErrVersion)
	require.NoError(t, s.Close())
}
