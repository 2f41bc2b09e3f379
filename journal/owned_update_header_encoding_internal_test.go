package journal

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An owned Update whose record keeps the client's header map (Like: the
// stored bytes hold it) writes the stored header's bytes as they are
// rather than walking, sorting and encoding the map again on every
// settle. What is stored is the same header: read from the overlay and
// from the file, and as the record's next Update decodes it. The pin:
// a header of more names than encodeHeader gathers on its stack (8)
// costs an Update with the client's copy no allocation more than a
// header of one name, where encoding the map grew the list of names.
func TestOwnedUpdateWritesTheStoredHeaderAsItIs(t *testing.T) {
	ctx := context.Background()
	many := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}}
	for i := range 10 {
		many[fmt.Sprintf("X-Header-%02d", i)] = []string{fmt.Sprint("v", i), "second"}
	}
	settle := func(s *Store, header http.Header) (*Record, context.Context) {
		rec := ownedUpdateRecord("k", 256)
		rec.Header = header
		created, l, err := s.CreateClaimed(ctx, rec, "owner", time.Now().Add(time.Hour))
		require.NoError(t, err)
		return created, likeLease(ctx, l, created)
	}

	s := ownedTestStore(t)
	created, lctx := settle(s, many)
	for _, from := range []string{"overlay", "file"} {
		if from == "file" {
			require.NoError(t, s.Checkpoint(ctx))
		}
		got, err := s.Update(lctx, "s", "k", func(r *Record) error {
			r.NextDue = r.NextDue.Add(time.Second)
			return nil
		})
		require.NoError(t, err, from)
		require.True(t, sameMap(got.Header, created.Header), "%s: the header map handed back is the client's", from)
		stored, err := s.Get(ctx, "s", "k")
		require.NoError(t, err, from)
		require.Equal(t, many, stored.Header, "%s: the header stored", from)
		require.Equal(t, got.NextDue, stored.NextDue, from)
		enc, _, _ := encodeHeader(nil, stored)
		again, err := decode(enc)
		require.NoError(t, err, from)
		require.Equal(t, many, again.Header, "%s: the header as encode writes it", from)
	}
	// A copy whose map is not the one decode took (a header changed by
	// fn, as the rules refuse) is encoded from the map as ever.
	_, err := s.Update(lctx, "s", "k", func(r *Record) error {
		r.Header = http.Header{"Content-Type": {"text/plain"}}
		return nil
	})
	require.ErrorIs(t, err, ErrInvalid, "a header changed by fn")

	if raceEnabled {
		return // the detector's instrumentation allocates
	}
	later := func(r *Record) { r.NextDue = r.NextDue.Add(time.Second) }
	one := ownedTestStore(t)
	_, oneCtx := settle(one, http.Header{"Content-Type": {"application/json"}})
	twelve := ownedTestStore(t)
	_, manyCtx := settle(twelve, many)
	require.Equal(t, updateAllocs(t, one, oneCtx, later), updateAllocs(t, twelve, manyCtx, later),
		"allocations per owned Update: a header of 12 names, of one")
}
