package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/owned"
)

// ownedUpdateRecord is ownedTestRecord with a body of size bytes, the size
// of a payment's JSON, so that a copy of it shows in the bytes allocated.
func ownedUpdateRecord(key string, size int) *Record {
	r := ownedTestRecord(key)
	r.Body = bytes.Repeat([]byte("x"), size)
	r.BodySHA = sha256.Sum256(r.Body)
	return r
}

// ownedLease returns WithLease(ctx, l) marked as the client marks the
// context of its own Updates.
func ownedLease(ctx context.Context, l Lease) context.Context {
	lctx := WithLease(ctx, l)
	owned.Mark(lctx)
	return lctx
}

// An Update the client marked as its own (its lease's context) hands back
// the body in its new encoding rather than a copy of the stored one: one
// allocation and the body's bytes fewer than the same Update unmarked.
// What it hands back is the stored body, unchanged however the file moves
// on after it: read from the file's own pages (the record applied and the
// overlay's copy dropped), then the file written, grown and remapped by
// hundreds of records. A body left pointing into the stored bytes would
// read what bbolt put there next, or fault once they are unmapped.
func TestOwnedUpdateKeepsTheBodyOfItsEncoding(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	expires := time.Now().Add(time.Hour)
	const size = 1024
	rec, l, err := s.CreateClaimed(ctx, ownedUpdateRecord("k", size), "owner", expires)
	require.NoError(t, err)
	want := bytes.Clone(rec.Body)
	require.NoError(t, s.Checkpoint(ctx)) // the record in the file, not the overlay

	var seen []byte
	got, err := s.Update(ownedLease(ctx, l), "s", "k", func(r *Record) error {
		seen = r.Body
		r.Review = "x"
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, want, seen, "the body fn is given")
	require.Equal(t, want, got.Body, "the body handed back")
	require.Equal(t, len(got.Body), cap(got.Body), "an append to the body handed back copies it")
	require.NotSame(t, &seen[0], &got.Body[0], "the body handed back is the stored bytes fn read, which last only as long as the round")

	for i := range 300 {
		_, err := s.Create(ctx, ownedUpdateRecord(fmt.Sprint("other", i), 4096))
		require.NoError(t, err)
	}
	_, err = s.Update(ownedLease(ctx, l), "s", "k", func(r *Record) error { r.Review = "y"; return nil })
	require.NoError(t, err)
	require.NoError(t, s.Checkpoint(ctx))
	require.Equal(t, want, got.Body, "the body handed back, once the file has moved on")
	stored, err := s.Get(ctx, "s", "k")
	require.NoError(t, err)
	require.Equal(t, want, stored.Body)
	require.Equal(t, "y", stored.Review)

	if raceEnabled {
		return // the detector's instrumentation allocates
	}
	review := func(r *Record) { r.Review = "z" }
	plain := updateAllocs(t, s, WithLease(ctx, l), review)
	mine := updateAllocs(t, s, ownedLease(ctx, l), review)
	require.LessOrEqual(t, mine, plain-1, "allocations per owned Update, per unmarked Update")
}

// updateAllocs is the allocations of an Update of record "k" under ctx
// whose fn is change, averaged over 100.
func updateAllocs(t *testing.T, s *Store, ctx context.Context, change func(*Record)) float64 {
	t.Helper()
	return testing.AllocsPerRun(100, func() {
		if _, err := s.Update(ctx, "s", "k", func(r *Record) error { change(r); return nil }); err != nil {
			t.Fatal(err)
		}
	})
}

// Only the context the client marked is its own: an unmarked lease's, or
// one derived from a marked one, gets a body of the caller's own, which
// the caller may write into without changing what is stored.
func TestUnmarkedUpdateBodyIsTheCallers(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	rec, l, err := s.CreateClaimed(ctx, ownedUpdateRecord("k", 64), "owner", time.Now().Add(time.Hour))
	require.NoError(t, err)
	want := bytes.Clone(rec.Body)
	type key struct{}
	for name, uctx := range map[string]context.Context{
		"unmarked lease":        WithLease(ctx, l),
		"derived from a marked": context.WithValue(ownedLease(ctx, l), key{}, 1),
	} {
		got, err := s.Update(uctx, "s", "k", func(r *Record) error {
			r.Body[0] = 'y' // refused: the body may not change
			return nil
		})
		require.ErrorIs(t, err, ErrInvalid, name)
		require.Nil(t, got, name)
		got, err = s.Update(uctx, "s", "k", func(r *Record) error { r.Review = "x"; return nil })
		require.NoError(t, err, name)
		got.Body[0] = 'z'
		stored, err := s.Get(ctx, "s", "k")
		require.NoError(t, err, name)
		require.Equal(t, want, stored.Body, name)
	}
}
