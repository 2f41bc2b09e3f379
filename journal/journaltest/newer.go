package journaltest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// NewerKey is the key, in scope "s", of the record of NewerRecords that a
// test of a Store makes one written by a newer idem before it calls
// NewerOpenRecord.
const NewerKey = "k0001"

// NewerRecords returns the open records NewerOpenRecord expects the Store
// to hold: more than a page of a scan of open records (256), soonest due
// first by key, NewerKey second.
func NewerRecords() []*journal.Record {
	recs := make([]*journal.Record, 256+2)
	for i := range recs {
		recs[i] = NewRecord("s", fmt.Sprintf("k%04d", i), t0.Add(time.Duration(i)*time.Second))
	}
	return recs
}

// NewerOpenRecord checks what a Store does with an open record written by
// a newer idem, as a rollback leaves it (its record version byte, the
// third of journal.EncodeRecord's, above journal.RecordVersion). Due,
// ForEachOpen and ClaimDue failed on it with journal.ErrVersion, which
// stopped Client.Run on its first pass and Resume at start-up, and no
// other open operation was settled again. s holds NewerRecords, NewerKey
// made newer; logged returns what the Store's logger has logged.
//
// The scans skip it, without it taking a place in their limit (a due
// record behind it would wait for good) and without it ending a paged
// scan early; the logger names it once, by its key; Stats counts it in
// Newer and Total only; a call naming its key still fails with
// journal.ErrVersion, writing nothing: a second record under its key
// would be a second order once the newer idem settles the first.
func NewerOpenRecord(t *testing.T, s idem.Store, logged func() string) {
	ctx := context.Background()
	n := len(NewerRecords())
	keysOf := func(recs []*journal.Record) []string {
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = r.Key
		}
		return out
	}
	for range 2 {
		due, err := s.Due(ctx, t0.Add(time.Hour), 3)
		require.NoError(t, err)
		require.Equal(t, []string{"k0000", "k0002", "k0003"}, keysOf(due), "the limit's worth of readable records")

		var visited []string
		require.NoError(t, s.ForEachOpen(ctx, func(r *journal.Record) error {
			visited = append(visited, r.Key)
			return nil
		}))
		require.Len(t, visited, n-1, "every readable open record, past the first page")
		require.NotContains(t, visited, NewerKey)

		claimed, err := s.ClaimDue(ctx, "me", t0.Add(time.Hour), t0.Add(2*time.Hour), 2)
		require.NoError(t, err)
		require.Equal(t, []string{"k0000", "k0002"}, keysOf(claimedRecords(claimed)))
		for _, c := range claimed {
			require.NoError(t, s.Release(ctx, c.Lease))
		}
	}
	require.Equal(t, 1, strings.Count(logged(), "level=WARN"), "said once: %s", logged())
	require.Contains(t, logged(), "key="+NewerKey)

	if ss, ok := s.(idem.StatsStore); ok {
		st, err := ss.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, st.Newer)
		require.Equal(t, 1, st.NewerOpen)
		require.Equal(t, n-1, st.Open)
		require.Equal(t, n, st.Total)
		require.Equal(t, map[journal.State]int{journal.StatePending: n - 1}, st.ByState)
	}
	requireNewerOpen(t, s, 1)

	_, err := s.Get(ctx, "s", NewerKey)
	require.ErrorIs(t, err, journal.ErrVersion)
	_, err = s.Create(ctx, NewRecord("s", NewerKey, t0))
	require.ErrorIs(t, err, journal.ErrVersion)
	_, err = s.Update(ctx, "s", NewerKey, func(r *journal.Record) error { r.State = journal.StateFailed; return nil })
	require.ErrorIs(t, err, journal.ErrVersion)
	_, _, err = s.Claim(ctx, "s", NewerKey, "me", t0, t0.Add(time.Hour))
	require.ErrorIs(t, err, journal.ErrVersion)
}

func claimedRecords(cs []journal.Claimed) []*journal.Record {
	out := make([]*journal.Record, len(cs))
	for i, c := range cs {
		out[i] = c.Record
	}
	return out
}

// NewerListKeys are the keys, in scope "s", of the records of
// CreateNewerListRecords that a test of a Store makes ones written by a
// newer idem before it calls NewerListed: a settled one flagged for
// review (a rollback keeps it: Prune leaves it for the newer idem) and an
// open one, side by side, so that a page of List may hold nothing else.
var NewerListKeys = []string{"l2", "l3"}

// CreateNewerListRecords writes in s, in scope "s", the records
// NewerListed expects: l0 succeeded and flagged for review, l1 failed,
// l2 succeeded and flagged, l3 pending, l4 unknown and flagged, l5
// pending.
func CreateNewerListRecords(t *testing.T, s idem.Store) {
	t.Helper()
	ctx := context.Background()
	set := map[string]func(*journal.Record){
		"l0": func(r *journal.Record) {
			r.State, r.Review = journal.StateSucceeded, "paid twice"
			r.Result = &journal.Result{ResourceID: "res-l0", StatusCode: 201}
		},
		"l1": func(r *journal.Record) {
			r.State = journal.StateFailed
			r.Result = &journal.Result{StatusCode: 422, Reason: "declined"}
		},
		"l2": func(r *journal.Record) {
			r.State, r.Review = journal.StateSucceeded, "paid twice"
			r.Result = &journal.Result{ResourceID: "res-l2", StatusCode: 201}
		},
		"l4": func(r *journal.Record) { r.State, r.Review = journal.StateUnknown, "key expired" },
	}
	for i := range 6 {
		k := fmt.Sprintf("l%d", i)
		create(t, s, NewRecord("s", k, t0))
		if fn, ok := set[k]; ok {
			_, err := s.Update(ctx, "s", k, func(r *journal.Record) error {
				fn(r)
				if r.State.Terminal() {
					r.Settled = t0
				}
				return nil
			})
			require.NoError(t, err)
		}
	}
}

// NewerListed checks List on a Store holding records a newer idem wrote,
// as a rollback leaves them: s holds CreateNewerListRecords, NewerListKeys
// made newer. List failed with journal.ErrVersion on any of them, settled
// ones included, so the operator's runbook (idem list -review, the admin
// handler's /operations) was unusable for as long as the rollback lasted.
// List leaves them out, whatever the filter, without their taking a place
// in the limit; a page of Filter.After paging made only of them neither
// ends the listing early nor repeats; Stats counts them in Newer, and the
// open one in NewerOpen too.
func NewerListed(t *testing.T, s idem.Store) {
	ctx := context.Background()
	tests := []struct {
		name string
		f    journal.Filter
		want []string
	}{
		{"all", journal.Filter{}, []string{"s/l0", "s/l1", "s/l4", "s/l5"}},
		{"review", journal.Filter{Review: true}, []string{"s/l0", "s/l4"}},
		{"succeeded", journal.Filter{States: []journal.State{journal.StateSucceeded}}, []string{"s/l0"}},
		{"open", journal.Filter{Open: true}, []string{"s/l4", "s/l5"}},
		{"pending", journal.Filter{States: []journal.State{journal.StatePending}}, []string{"s/l5"}},
		{"scope", journal.Filter{Scope: "s"}, []string{"s/l0", "s/l1", "s/l4", "s/l5"}},
		{"limit", journal.Filter{Limit: 3}, []string{"s/l0", "s/l1", "s/l4"}},
		{"after, limit", journal.Filter{After: journal.Position{Scope: "s", Key: "l1"}, Limit: 1}, []string{"s/l4"}},
		{"after, review, limit", journal.Filter{Review: true, After: journal.Position{Scope: "s", Key: "l0"}, Limit: 1}, []string{"s/l4"}},
		{"after, open, limit", journal.Filter{Open: true, After: journal.Position{Scope: "s", Key: "l1"}, Limit: 1}, []string{"s/l4"}},
	}
	for _, tt := range tests {
		got, err := s.List(ctx, tt.f)
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, nilIfEmpty(keys(got)), "%s: List(%+v)", tt.name, tt.f)
	}

	// Paged as the admin handler pages: each page after the last key of
	// the one before.
	var paged []string
	after := journal.Position{}
	for range 10 {
		page, err := s.List(ctx, journal.Filter{After: after, Limit: 1})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, keys(page)...)
		after = journal.Position{Scope: page[0].Scope, Key: page[0].Key}
	}
	require.Equal(t, []string{"s/l0", "s/l1", "s/l4", "s/l5"}, paged)

	if ss, ok := s.(idem.StatsStore); ok {
		st, err := ss.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, st.Newer)
		require.Equal(t, 1, st.NewerOpen)
		require.Equal(t, 6, st.Total)
		require.Equal(t, 2, st.Review, "the readable flagged ones")
	}
	requireNewerOpen(t, s, 1)
}

// requireNewerOpen checks that s, if it is an idem.NewerOpenCounter,
// counts want open records written by a newer idem: the settled ones
// not, though Stats' Newer counts them.
func requireNewerOpen(t *testing.T, s idem.Store, want int) {
	t.Helper()
	if c, ok := s.(idem.NewerOpenCounter); ok {
		n, err := c.NewerOpen(context.Background())
		require.NoError(t, err)
		require.Equal(t, want, n, "NewerOpen()")
	}
}

// MakeNewer makes the records of keys, in scope, in the bbolt journal file
// at path (which no Store may hold) ones written by a newer idem, as a
// rollback leaves them: their record version byte, the third, above
// journal.RecordVersion.
func MakeNewer(t testing.TB, path, scope string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		SetRecordByte(t, path, scope, k, 2, journal.RecordVersion+1)
	}
}

// SetRecordByte sets byte i of the stored record of scope and key, open or
// settled, in the bbolt journal file at path (which no Store may hold).
func SetRecordByte(t testing.TB, path, scope, key string, i int, b byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		sk := tx.Bucket([]byte("keys")).Get([]byte(scope + "\x00" + key))
		require.NotNil(t, sk, "no key %s/%s", scope, key)
		for _, name := range []string{"open.seq", "done.seq"} {
			if v := tx.Bucket([]byte(name)).Get(sk); v != nil {
				v = bytes.Clone(v)
				v[i] = b
				return tx.Bucket([]byte(name)).Put(sk, v)
			}
		}
		return fmt.Errorf("no record for %s/%s", scope, key)
	}))
}
