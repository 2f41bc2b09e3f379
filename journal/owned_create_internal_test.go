package journal

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/owned"
)

func ownedTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "j"), WithUnsafeNoSync())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func ownedTestRecord(key string) *Record {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"amount":1000,"currency":"EUR"}`)
	return &Record{
		Scope: "s", Key: key, Method: "POST", URL: "http://127.0.0.1/v1/orders",
		Header: map[string][]string{"Content-Type": {"application/json"}},
		Body:   body, BodySHA: sha256.Sum256(body),
		State: StatePending, Created: now, Updated: now, NextDue: now.Add(time.Minute),
	}
}

// The mark vouches for the body the client hashed, and for nothing else:
// any record that is not exactly the one marked, with the body and digest
// it was marked with, is hashed and refused when its digest is wrong.
func TestCreateRefusesMismatchedBodyUnlessClientOwned(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	wrong := sha256.Sum256([]byte("another body"))
	cases := []struct {
		name string
		make func(key string) *Record
	}{
		{"never marked", func(key string) *Record {
			r := ownedTestRecord(key)
			r.BodySHA = wrong
			return r
		}},
		{"body replaced after marking", func(key string) *Record {
			r := ownedTestRecord(key)
			owned.Mark(r)
			r.Body = []byte(`{"amount":9999,"currency":"EUR"}`)
			return r
		}},
		{"digest changed after marking", func(key string) *Record {
			r := ownedTestRecord(key)
			owned.Mark(r)
			r.BodySHA = wrong
			return r
		}},
		{"copy of a marked record", func(key string) *Record {
			r := ownedTestRecord(key)
			r.BodySHA = wrong
			owned.Mark(r)
			c := *r
			return &c
		}},
		{"body shortened after marking", func(key string) *Record {
			r := ownedTestRecord(key)
			owned.Mark(r)
			r.Body = r.Body[:len(r.Body)-1]
			return r
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "k" + strconv.Itoa(i)
			_, err := s.Create(ctx, tc.make(key))
			require.ErrorIs(t, err, ErrInvalid)
			_, err = s.Get(ctx, "s", key)
			require.ErrorIs(t, err, ErrNotFound, "a refused record must not be journaled")
		})
	}

	// The one case the digest is taken as given: the record marked, as
	// marked. (The client computes the digest from the copy it marks, so
	// it cannot be wrong there; a wrong one shows the hash was skipped.)
	r := ownedTestRecord("trusted")
	r.BodySHA = wrong
	owned.Mark(r)
	_, err := s.Create(ctx, r)
	require.NoError(t, err, "a marked record's digest is the client's: not hashed again")
}

// A marked record's body and header are shared with the record Create
// returns, not copied: that is what the mark saves (the record itself is
// handed back: TestAdoptedRecordIsTheClients). The returned record is
// still exactly what a later Get decodes.
func TestCreateOfOwnedRecordCopiesNeitherBodyNorHeader(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)

	plain := ownedTestRecord("plain")
	stored, err := s.Create(ctx, plain)
	require.NoError(t, err)
	require.NotSame(t, &plain.Body[0], &stored.Body[0], "an unmarked record's body is copied")

	mine := ownedTestRecord("mine")
	mine.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: mine.Created}}
	owned.Mark(mine)
	stored, err = s.Create(ctx, mine)
	require.NoError(t, err)
	require.Same(t, &mine.Body[0], &stored.Body[0], "a marked record's body is shared")
	require.Same(t, mine, stored, "the client's record itself, in stored form (adopt)")
	got, err := s.Get(ctx, "s", "mine")
	require.NoError(t, err)
	require.Equal(t, got, stored, "Create returns what Get decodes, the mark not included")

	var n int
	allocs := func(mark bool) float64 {
		return testing.AllocsPerRun(50, func() {
			n++
			r := ownedTestRecord("a" + strconv.Itoa(n))
			if mark {
				owned.Mark(r)
			}
			if _, err := s.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
		})
	}
	unmarked, marked := allocs(false), allocs(true)
	t.Logf("allocs per Create: unmarked %.1f, marked %.1f", unmarked, marked)
	require.LessOrEqual(t, marked, unmarked-3, "the body and the header (map and values) are not copied")
}
