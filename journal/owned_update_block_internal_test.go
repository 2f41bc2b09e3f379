package journal

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOwnedUpdateDecodesIntoItsOp: the client's own Update (its lease's
// context, sync off) of a record as the client settles it (one attempt,
// a header of one value) costs the op (with the record it decodes:
// updateOp.block), the request's strings, the header map and its group,
// and the new encoding: five allocations. The record in an allocation of
// its own was a sixth, once per operation, on the client's path.
func TestOwnedUpdateDecodesIntoItsOp(t *testing.T) {
	if raceEnabled {
		t.Skip("the detector's instrumentation allocates")
	}
	ctx := context.Background()
	s := ownedTestStore(t)
	rec := ownedUpdateRecord("k", 1024)
	rec.Header = http.Header{"Content-Type": {"application/json"}}
	rec.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: rec.Created}}
	_, l, err := s.CreateClaimed(ctx, rec, "owner", time.Now().Add(time.Hour))
	require.NoError(t, err)
	uctx := ownedLease(ctx, l)
	var got *Record
	allocs := testing.AllocsPerRun(200, func() {
		if got, err = s.Update(uctx, "s", "k", func(r *Record) error { r.Attempts[0].Status++; return nil }); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, 201, got.Attempts[0].Status, "the record handed back is the last Update's")
	require.Equal(t, []string{"application/json"}, got.Header["Content-Type"])
	require.Equal(t, 5.0, allocs, "allocations per owned Update")
}
