package journal

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeKeyPlacementAllocatesNothing: every version 7 record carries
// its key's placement, and a Get, a scan's every record and an Update's
// read-back decoded it into a string of its own: one allocation more per
// record than a record without it (Get 3 → 4). The placement a Client
// writes by default, the key in the body, and an Update's own record's
// (like) are taken as they are; any other still decodes to itself.
func TestDecodeKeyPlacementAllocatesNothing(t *testing.T) {
	base := encode(nil, blockRecord("k"))
	decodeAllocs := func(enc []byte, like *Record) float64 {
		return testing.AllocsPerRun(200, func() {
			if _, _, _, err := decodeStoredIn(new(recordBlock), enc, false, like); err != nil {
				t.Fatal(err)
			}
		})
	}
	without := decodeAllocs(base, nil)
	for _, placement := range []string{"header Idempotency-Key", "body", "header Idempotency-Key quoted"} {
		r := blockRecord("k")
		r.KeyPlacement = placement
		enc := encode(nil, r)
		require.Equal(t, without, decodeAllocs(enc, nil), "allocations per decode of %q", placement)
		got, err := decode(enc)
		require.NoError(t, err)
		require.Equal(t, placement, got.KeyPlacement)
	}

	// An Update's own record, whatever the header's name.
	r := blockRecord("k")
	r.KeyPlacement = "header PayPal-Request-Id"
	enc := encode(nil, r)
	require.Equal(t, decodeAllocs(base, blockRecord("k")), decodeAllocs(enc, r), "allocations per decode like the record")
	got, _, _, err := decodeStoredIn(new(recordBlock), enc, false, &Record{KeyPlacement: "header Other"})
	require.NoError(t, err)
	require.Equal(t, "header PayPal-Request-Id", got.KeyPlacement, "unlike the record: its own")
}
