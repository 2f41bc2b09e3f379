package journal_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestUpdateKeepsRequestAndResolution: promise 2 covers headers and
// the result URL too, and only Resolve may record a manual resolution.
func TestUpdateKeepsRequestAndResolution(t *testing.T) {
	ctx := context.Background()
	s, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k", time.Now()))
	require.NoError(t, err)
	changes := map[string]func(r *journal.Record){
		"header":   func(r *journal.Record) { r.Header.Set("X-Extra", "1") },
		"queryURL": func(r *journal.Record) { r.QueryURL = "https://elsewhere.example/ops/k" },
		"created":  func(r *journal.Record) { r.Created = r.Created.Add(time.Hour) },
		"resolved": func(r *journal.Record) { r.Resolved = &journal.Resolution{By: "forger", Reason: "x", At: time.Now()} },
	}
	for name, change := range changes {
		_, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error { change(r); return nil })
		require.ErrorIs(t, err, journal.ErrInvalid, name)
	}
}

// TestUpdateHeaderRules: Update compares the header fn leaves with the
// stored one on their encodings rather than on a copy of the map taken
// before fn. Every change to the header (in place or by replacing the
// map, a key or a value added, removed or edited) must still be refused,
// and an equal header, in whatever map, accepted.
func TestUpdateHeaderRules(t *testing.T) {
	tests := []struct {
		name   string
		change func(h http.Header) http.Header
		ok     bool
	}{
		{"value changed in place", func(h http.Header) http.Header { h["Content-Type"][0] = "text/plain"; return h }, false},
		{"value appended", func(h http.Header) http.Header { h.Add("Content-Type", "text/plain"); return h }, false},
		{"key added", func(h http.Header) http.Header { h.Set("X-Extra", "1"); return h }, false},
		{"key added without values", func(h http.Header) http.Header { h["X-Extra"] = nil; return h }, false},
		{"key removed", func(h http.Header) http.Header { h.Del("Content-Type"); return h }, false},
		{"key renamed", func(h http.Header) http.Header {
			h["content-type"] = h["Content-Type"]
			delete(h, "Content-Type")
			return h
		}, false},
		{"values emptied", func(h http.Header) http.Header { h["Content-Type"] = nil; return h }, false},
		{"header dropped", func(http.Header) http.Header { return nil }, false},
		{"value moved to another key", func(http.Header) http.Header {
			return http.Header{"Content-Type": {}, "X-Content-Type": {"application/json"}}
		}, false},
		{"an equal copy", func(h http.Header) http.Header { return h.Clone() }, true},
		{"removed and put back", func(h http.Header) http.Header {
			v := h.Get("Content-Type")
			h.Del("Content-Type")
			h.Set("Content-Type", v)
			return h
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := openTemp(t)
			rec := journaltest.NewRecord("acct", "k", t0)
			rec.Header.Set("Accept", "application/json") // two keys: an order to keep
			want, err := s.Create(ctx, rec)
			require.NoError(t, err)
			got, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error {
				r.Header = tt.change(r.Header)
				r.Review = "changed"
				return nil
			})
			stored, gerr := s.Get(ctx, "acct", "k")
			require.NoError(t, gerr)
			if !tt.ok {
				require.ErrorIs(t, err, journal.ErrInvalid, "Update()")
				require.Equal(t, want, stored, "nothing written")
				return
			}
			require.NoError(t, err, "Update()")
			require.Equal(t, want.Header, got.Header, "Update() header")
			require.Equal(t, got, stored, "Get() after Update()")
		})
	}
}

// TestUpdatePanicWritesNothing: a panic in fn, even after it changed the
// header in place, comes back to the caller and leaves the record as it
// was, in the round and in the journal.
func TestUpdatePanicWritesNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	want, err := s.Create(ctx, journaltest.NewRecord("acct", "k", t0))
	require.NoError(t, err)
	require.PanicsWithValue(t, "boom", func() {
		_, _ = s.Update(ctx, "acct", "k", func(r *journal.Record) error {
			r.Header["Content-Type"][0] = "text/plain"
			r.Review = "half done"
			panic("boom")
		})
	})
	got, err := s.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Equal(t, want, got, "Get() after a panicking Update()")
	_, err = s.Update(ctx, "acct", "k", func(r *journal.Record) error { r.Review = "after"; return nil })
	require.NoError(t, err, "Update() after a panicking one")
}
