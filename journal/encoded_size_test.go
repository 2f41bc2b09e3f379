package journal

import (
	"crypto/sha256"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEncodedSizeIsExact: encode sizes its buffer with encodedSize, which
// must be the encoding's length exactly (a record that outgrows it is
// copied as it grows; one that falls short wastes a size class).
func TestEncodedSizeIsExact(t *testing.T) {
	body := []byte("x")
	local := time.FixedZone("far east", 14*3600)
	recs := map[string]*Record{
		"full":                  fullRecord(),
		"minimal":               {Scope: "s", Key: "k", State: StatePending},
		"resolved without from": {Scope: "s", Key: "k", State: StateFailed, Resolved: &Resolution{}, Result: &Result{}},
		"binary strings":        {Scope: "\xff\xfe", Key: "k\x01", State: StateSucceeded, Body: body, BodySHA: sha256.Sum256(body)},
		"bench":                 benchRecord("key-000000001", benchBody, benchSHA),
		"extremes": {Scope: "s", Key: "k", State: StateUnknown,
			Attempts: []Attempt{
				{Number: math.MinInt, Start: time.Unix(math.MinInt64/2, 999_999_999), Status: math.MaxInt, RetryAfter: math.MinInt64, Duration: math.MaxInt64},
				{Number: math.MaxInt, Kind: "x", Start: time.Date(2026, 3, 1, 1, 0, 0, 1, local), Status: -1},
			},
			Result:  &Result{StatusCode: -129, Body: make([]byte, 1<<14)},
			Created: time.Date(-30000, 1, 1, 0, 0, 0, 0, time.UTC), Updated: time.Unix(1<<40, 0).In(local),
			Confirmations: []Confirmation{{StatusCode: math.MinInt, At: time.Unix(-1, 1)}},
			Trace:         string(make([]byte, 200))},
	}
	settled := benchRecord("key-000000002", benchBody, benchSHA)
	require.NoError(t, settleRecord(settled))
	recs["bench settled"] = settled
	for name, r := range recs {
		enc := encode(nil, r)
		require.Equal(t, len(enc), encodedSize(r), name)
	}
}

// FuzzEncodedSize: encodedSize is exact for every record decode accepts.
func FuzzEncodedSize(f *testing.F) {
	f.Add(encode(nil, fullRecord()))
	f.Add(encode(nil, &Record{Scope: "s", Key: "k", State: StatePending}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode(b)
		if err != nil {
			return
		}
		if n, want := encodedSize(r), len(encode(nil, r)); n != want {
			t.Fatalf("encodedSize = %d; the encoding is %d bytes", n, want)
		}
	})
}
