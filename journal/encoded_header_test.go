package journal

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEncodedHeaderSpans: Update compares a record's request header on the
// encodings, as encodeHeader and decodeStored find it in passing; both
// must be exactly what encodedHeader reads there.
func TestEncodedHeaderSpans(t *testing.T) {
	settled := benchRecord("key-000000002", benchBody, benchSHA)
	require.NoError(t, settleRecord(settled))
	for name, r := range map[string]*Record{
		"full":      fullRecord(),
		"minimal":   {Scope: "s", Key: "k", State: StatePending},
		"bench":     benchRecord("key-000000001", benchBody, benchSHA),
		"settled":   settled,
		"no header": {Scope: "s", Key: "k", State: StatePending, Review: "r", QueryURL: "q", Body: []byte("b")},
	} {
		enc, header, _ := encodeHeader(nil, r)
		require.Equal(t, encode(nil, r), enc, name)
		require.Equal(t, appendHeader(nil, r.Header), header, name)
		require.Equal(t, encodedHeader(enc), header, name)
		grown := append(header, 0xff) // capped: cannot write into the rest of enc
		require.Equal(t, encode(nil, r), enc, name)
		require.Equal(t, appendHeader(nil, r.Header), grown[:len(grown)-1], name)

		got, body, stored, err := decodeStored(enc)
		require.NoError(t, err, name)
		require.Equal(t, encodedHeader(enc), stored, name)
		require.True(t, bytes.Equal(got.Body, body), name)
	}
}

// FuzzStoredHeader: what decodeStored returns as the header is
// encodedHeader's, for every record decode accepts.
func FuzzStoredHeader(f *testing.F) {
	f.Add(encode(nil, fullRecord()))
	f.Add(encode(nil, &Record{Scope: "s", Key: "k", State: StatePending}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, header, err := decodeStored(b)
		if err != nil {
			return
		}
		if want := encodedHeader(b); !bytes.Equal(header, want) {
			t.Fatalf("decodeStored's header %x; encodedHeader %x", header, want)
		}
	})
}
