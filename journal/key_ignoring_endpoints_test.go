package journal_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// The endpoints a Client learnt ignore the key (idem.KeyIgnoringStore)
// outlive the process: kept across Close and Open, read-only too, and
// through Compact; one added again writes nothing, and past
// MaxKeyIgnoringEndpoints none is kept (ErrKeyIgnoringFull), until an
// operator removes one (RemoveKeyIgnoring). A file made before them (the
// bucket absent) opens and reads none, and gets the bucket on its first
// AddKeyIgnoring, which passes the journal's check.
func TestKeyIgnoringEndpointsKept(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "idem.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	got, err := s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "a new file keeps none")
	const charge = "POST http://127.0.0.1:8080/api/v1/charge"
	for range 2 {
		require.NoError(t, s.AddKeyIgnoring(ctx, charge))
	}
	require.ErrorIs(t, s.AddKeyIgnoring(ctx, ""), journal.ErrInvalid)
	require.ErrorIs(t, s.AddKeyIgnoring(ctx, "POST http://127.0.0.1/"+strings.Repeat("a", journal.MaxKeyIgnoringEndpoint)), journal.ErrInvalid)
	require.NoError(t, s.Close())

	s, err = journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	got, err = s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{charge}, got, "read-only, after a reopen")
	require.ErrorIs(t, s.AddKeyIgnoring(ctx, "POST http://127.0.0.1:8080/api/v1/refund"), journal.ErrReadOnly)
	require.NoError(t, s.Close())
	require.NoError(t, journal.Check(path))

	s, err = journal.Open(path, journal.WithUnsafeNoSync()) // a thousand commits, not a thousand fsyncs
	require.NoError(t, err)
	want := []string{charge} // sorts before "orders"
	for i := range journal.MaxKeyIgnoringEndpoints + 1 {
		e := fmt.Sprintf("POST http://127.0.0.1:8080/api/v1/orders/%04d/pay", i)
		err := s.AddKeyIgnoring(ctx, e)
		if len(want) < journal.MaxKeyIgnoringEndpoints {
			require.NoError(t, err)
			want = append(want, e)
			continue
		}
		// Not "recorded": the Client would clear the last flag that
		// tells the next process of the endpoint.
		require.ErrorIs(t, err, journal.ErrKeyIgnoringFull, "AddKeyIgnoring past the bound")
	}
	require.NoError(t, s.AddKeyIgnoring(ctx, charge), "AddKeyIgnoring of one kept, the store full")
	require.NoError(t, s.Close())
	_, err = journal.Compact(path)
	require.NoError(t, err)
	s, err = journal.Open(path)
	require.NoError(t, err)
	got, err = s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Len(t, got, journal.MaxKeyIgnoringEndpoints, "after Compact")
	require.True(t, slices.Equal(want, got), "after Compact: the first %d added, in byte order; the last one past the bound", journal.MaxKeyIgnoringEndpoints)

	// An operator forgets one (its provider de-duplicates now): it makes
	// room for another.
	removed, err := s.RemoveKeyIgnoring(ctx, charge)
	require.NoError(t, err)
	require.True(t, removed, "RemoveKeyIgnoring(charge)")
	removed, err = s.RemoveKeyIgnoring(ctx, charge)
	require.NoError(t, err)
	require.False(t, removed, "RemoveKeyIgnoring(charge) again")
	last := fmt.Sprintf("POST http://127.0.0.1:8080/api/v1/orders/%04d/pay", journal.MaxKeyIgnoringEndpoints)
	require.NoError(t, s.AddKeyIgnoring(ctx, last))
	require.NoError(t, s.Close())
	s, err = journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	got, err = s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Len(t, got, journal.MaxKeyIgnoringEndpoints)
	require.NotContains(t, got, charge)
	require.Equal(t, last, got[len(got)-1])
	_, err = s.RemoveKeyIgnoring(ctx, last)
	require.ErrorIs(t, err, journal.ErrReadOnly)
	require.NoError(t, s.Close())
	require.NoError(t, journal.Check(path))
}

func TestKeyIgnoringEndpointsOfAnOlderFile(t *testing.T) {
	ctx := t.Context()
	path, _ := oldJournal(t, "v2")
	s, err := journal.Open(path)
	require.NoError(t, err)
	got, err := s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	const charge = "POST https://api.example.com/api/v1/charge"
	require.NoError(t, s.AddKeyIgnoring(ctx, charge))
	require.NoError(t, s.Close())
	require.NoError(t, journal.Check(path))
	s, err = journal.Open(path)
	require.NoError(t, err)
	got, err = s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{charge}, got)
	require.NoError(t, s.Close())
}
