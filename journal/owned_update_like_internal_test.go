package journal

import (
	"context"
	"encoding/binary"
	"net/http"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/owned"
)

// likeLease is ownedLease that also names like as the client's copy of
// the record, as the client's drive does for each of its Updates.
func likeLease(ctx context.Context, l Lease, like *Record) context.Context {
	lctx := ownedLease(ctx, l)
	owned.Like(lctx, like)
	return lctx
}

func sameMap(a, b http.Header) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// An owned Update of a record whose request the client's copy (Like)
// holds the same decodes that request as the copy's own strings and
// header map: the text's string and the map were three allocations of
// every settle. Whether the record is read from the overlay or from the
// file's pages, what is stored and handed back is the same record.
func TestOwnedUpdateTakesTheClientsRequest(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	rec := ownedUpdateRecord("k", 256)
	rec.Header["Stripe-Account"] = []string{"acct_1"}
	rec.Ref = "order-1"
	created, l, err := s.CreateClaimed(ctx, rec, "owner", time.Now().Add(time.Hour))
	require.NoError(t, err)

	for _, from := range []string{"overlay", "file"} {
		if from == "file" {
			require.NoError(t, s.Checkpoint(ctx))
		}
		got, err := s.Update(likeLease(ctx, l, created), "s", "k", func(r *Record) error {
			r.Review = ""
			r.NextDue = r.NextDue.Add(time.Second)
			return nil
		})
		require.NoError(t, err, from)
		require.True(t, sameMap(got.Header, created.Header), "%s: the header map handed back is the client's", from)
		for _, f := range [][2]string{{got.Scope, created.Scope}, {got.Key, created.Key}, {got.Ref, created.Ref},
			{got.Method, created.Method}, {got.URL, created.URL}} {
			require.True(t, sameString(f[0], f[1]), "%s: %q is the client's string", from, f[0])
		}
		stored, err := s.Get(ctx, "s", "k")
		require.NoError(t, err)
		require.Equal(t, created.Header, stored.Header, from)
		require.Equal(t, created.URL, stored.URL, from)
		require.Equal(t, got.NextDue, stored.NextDue, from)
	}

	if raceEnabled {
		return // the detector's instrumentation allocates
	}
	later := func(r *Record) { r.NextDue = r.NextDue.Add(time.Second) }
	plain := updateAllocs(t, s, ownedLease(ctx, l), later)
	mine := updateAllocs(t, s, likeLease(ctx, l, created), later)
	require.LessOrEqual(t, mine, plain-3, "allocations per owned Update with the client's copy, without it")
}

// A copy that differs from the stored request in anything, a header's
// value, a header more or fewer, a string, is not taken: the record is
// decoded from the stored bytes as without a copy, so a stale or wrong
// copy can never put a request in the record that the journal does not
// hold (nor make fn's unchanged record read as a changed header).
func TestOwnedUpdateDecodesARequestUnlikeTheClients(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	created, l, err := s.CreateClaimed(ctx, ownedUpdateRecord("k", 64), "owner", time.Now().Add(time.Hour))
	require.NoError(t, err)
	unlike := map[string]func(r *Record){
		"header value":   func(r *Record) { r.Header = http.Header{"Content-Type": {"text/plain"}} },
		"header more":    func(r *Record) { r.Header = http.Header{"Content-Type": {"application/json"}, "X-A": {"1"}} },
		"header fewer":   func(r *Record) { r.Header = nil },
		"second value":   func(r *Record) { r.Header = http.Header{"Content-Type": {"application/json", "x"}} },
		"URL":            func(r *Record) { r.URL = "http://127.0.0.1/v1/orders/" },
		"key":            func(r *Record) { r.Key = "j" },
		"review present": func(r *Record) { r.Review = "checked by hand" },
	}
	for name, change := range unlike {
		like := *created
		change(&like)
		got, err := s.Update(likeLease(ctx, l, &like), "s", "k", func(r *Record) error { return nil })
		require.NoError(t, err, name)
		require.False(t, sameMap(got.Header, like.Header), "%s: the header map is the stored one's", name)
		require.Equal(t, created.Header, got.Header, name)
		require.Equal(t, created.URL, got.URL, name)
		require.Equal(t, created.Key, got.Key, name)
		require.Empty(t, got.Review, name)
	}
}

// headerIs takes an encoding for h only when it holds h's names once
// each: a duplicate name, which decode refuses as damage, never reads
// as a header of as many names.
func TestHeaderIsRefusesADuplicateName(t *testing.T) {
	entry := func(dst []byte, k, v string) []byte {
		dst = appendString(dst, k)
		dst = binary.AppendUvarint(dst, 1)
		return appendString(dst, v)
	}
	h := http.Header{"A": {"x"}, "B": {"y"}}
	dup := entry(entry(binary.AppendUvarint(nil, 2), "A", "x"), "A", "x")
	d := decoder{b: dup}
	require.False(t, d.headerIs(h), "A twice")
	ok := entry(entry(binary.AppendUvarint(nil, 2), "A", "x"), "B", "y")
	d = decoder{b: ok}
	require.True(t, d.headerIs(h))
	require.Empty(t, d.b)
}
