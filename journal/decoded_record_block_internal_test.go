package journal

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// blockRecord is a pending record as an Update finds it after the create
// journaled its first send: one attempt, a header of one value.
func blockRecord(key string) *Record {
	r := newRecord(key)
	r.Header = http.Header{"Content-Type": {"application/json"}}
	r.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: time.Unix(1700000000, 0).UTC()}}
	return r
}

// TestDecodeCarvesAttemptAndValueFromTheRecord: a record of one attempt and
// a one-value header decodes in two allocations fewer than it did (the
// attempts' and the value's slices share the record's), and what the
// caller is handed behaves as separately allocated slices would: each is
// capped at its length, so appending to the attempts or to a header value
// list leaves every other field as it was, and writing into one changes
// nothing else. Records past the room (more attempts or values) decode as
// before, equal to what was encoded.
func TestDecodeCarvesAttemptAndValueFromTheRecord(t *testing.T) {
	enc := encode(nil, blockRecord("k"))
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := decode(enc); err != nil {
			t.Fatal(err)
		}
	})
	// The record (with its attempt and value), the request's strings, the
	// header map and its group, the body: 7 before the block.
	require.LessOrEqual(t, allocs, 5.0, "allocations per decode")

	r, err := decode(enc)
	require.NoError(t, err)
	require.Equal(t, 1, cap(r.Attempts), "the attempts' capacity")
	require.Equal(t, 1, cap(r.Header["Content-Type"]), "the value list's capacity")
	want, err := decode(enc)
	require.NoError(t, err)
	r.Attempts = append(r.Attempts, Attempt{Number: 2, Err: "appended"})
	r.Header["Content-Type"] = append(r.Header["Content-Type"], "text/plain")
	r.Header["Content-Type"][0] = "changed"
	r.Attempts[0].Err = "changed"
	require.Equal(t, want.Attempts[0], blockRecord("k").Attempts[0], "a fresh decode's attempt")
	r.Attempts, r.Header = want.Attempts, want.Header
	require.Equal(t, want, r, "the record after its slices were appended to")

	for _, tt := range []struct {
		name     string
		attempts int
		header   http.Header
	}{
		{"none", 0, nil},
		{"two attempts", 2, http.Header{"Content-Type": {"application/json"}}},
		{"two values of one key", 1, http.Header{"Accept": {"a", "b"}}},
		{"three keys", 3, http.Header{"A": {"1"}, "B": {"2", "3"}, "C": {}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := newRecord("k")
			in.Header = tt.header
			for i := range tt.attempts {
				in.Attempts = append(in.Attempts, Attempt{Number: i + 1, Kind: AttemptSubmit, Start: time.Unix(1700000000+int64(i), 0).UTC(), Err: "e"})
			}
			got, err := decode(encode(nil, in))
			require.NoError(t, err)
			require.Equal(t, in.Attempts, got.Attempts)
			require.Equal(t, len(in.Header), len(got.Header))
			for k, vs := range in.Header {
				require.Equal(t, vs, got.Header[k], "header %s", k)
				require.Equal(t, len(vs), cap(got.Header[k]), "header %s's capacity", k)
			}
		})
	}
}

// TestUpdatedRecordSharesNothingWithTheNext: the record an Update hands
// back (decoded from the block) is the caller's: a later Update of the same
// record, and the caller's own appends to it, change nothing of the other.
func TestUpdatedRecordSharesNothingWithTheNext(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"), WithUnsafeNoSync())
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	_, err = s.Create(ctx, blockRecord("k"))
	require.NoError(t, err)
	first, err := s.Update(ctx, "s", "k", func(r *Record) error {
		r.Attempts[0].Done = true
		return nil
	})
	require.NoError(t, err)
	second, err := s.Update(ctx, "s", "k", func(r *Record) error {
		r.Attempts[0].Status = 500
		r.Attempts = append(r.Attempts, Attempt{Number: 2, Kind: AttemptSubmit, Start: time.Unix(1700000001, 0).UTC()})
		return nil
	})
	require.NoError(t, err)
	require.Len(t, first.Attempts, 1, "the first Update's attempts")
	require.Zero(t, first.Attempts[0].Status, "the first Update's attempt after the second Update")
	first.Attempts[0].Err = "the caller's"
	first.Header["Content-Type"][0] = "the caller's"
	require.Empty(t, second.Attempts[0].Err, "the second Update's attempt")
	require.Equal(t, []string{"application/json"}, second.Header["Content-Type"])
	got, err := s.Get(ctx, "s", "k")
	require.NoError(t, err)
	require.Equal(t, []Attempt{{Number: 1, Kind: AttemptSubmit, Start: time.Unix(1700000000, 0).UTC(), Done: true, Status: 500},
		{Number: 2, Kind: AttemptSubmit, Start: time.Unix(1700000001, 0).UTC()}}, got.Attempts)
	require.Equal(t, []string{"application/json"}, got.Header["Content-Type"])
}
