package journal

import (
	"bytes"
	"crypto/sha256"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fullRecord() *Record {
	body := []byte(`{"amount":1250,"currency":"EUR"}`)
	return &Record{
		Scope:    "acct_42",
		Key:      "5b0c7a0e-8d1f-4f0a-9d55-1f1bb1f0c0de",
		Ref:      "draft-17",
		Method:   http.MethodPost,
		URL:      "https://api.example.com/v1/orders",
		QueryURL: "https://api.example.com/v1/orders/by-key/5b0c",
		Header:   http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "", "c"}, "X-Empty": {}},
		Body:     body,
		BodySHA:  sha256.Sum256(body),
		State:    StateUnknown,
		Review:   "key expired",
		Attempts: []Attempt{
			{Number: 1, Kind: AttemptSubmit, Start: t0, Wrote: true, Done: true, Status: 504, Err: "", RetryAfter: 0, Duration: 3 * time.Second},
			{Number: 2, Kind: AttemptQuery, Start: t0.Add(time.Second), Done: true, Status: 404, Duration: time.Millisecond},
			{Number: 3, Kind: AttemptSubmit, Start: t0.Add(time.Second), Wrote: true, Done: true, Status: 409, Refused: true},
			{Number: 4, Kind: AttemptSubmit, Start: t0.Add(time.Second), Wrote: true, Done: true, Status: 500, Replayed: true},
			{Number: 3, Kind: "future-kind", Start: t0.Add(2 * time.Second), Wrote: true, Err: "read: connection reset", RetryAfter: -time.Second, Duration: math.MaxInt64},
			{Number: -1},
		},
		Result:    &Result{ResourceID: "ord_1", StatusCode: 201, Body: []byte(`{"id":"ord_1"}`), Reason: "created", Replayed: true},
		Resolved:  &Resolution{By: "alice", Reason: "dashboard", At: t0.Add(time.Hour), From: StateProcessing},
		Created:   t0,
		FirstSent: t0.Add(123456789 * time.Nanosecond),
		Updated:   time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		Settled:   time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		NextDue:   time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
		Confirmations: []Confirmation{
			{State: StateSucceeded, ResourceID: "ord_1", Source: "webhook", EventID: "evt_1", Reason: "order.created", StatusCode: 201, At: t0.Add(time.Minute), Effect: ConfirmAgreed},
			{State: StateFailed, Source: "webhook", EventID: "evt_2", At: t0.Add(2 * time.Minute), Effect: ConfirmConflicted},
			{State: StateProcessing, Source: "idem: server response", EventID: "attempt 3", StatusCode: 409, At: t0.Add(3 * time.Minute), Effect: ConfirmConflicted},
		},
		Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	body := []byte("x")
	tests := []struct {
		name string
		rec  *Record
	}{
		{"full", fullRecord()},
		{"minimal", &Record{Scope: "s", Key: "k", State: StatePending}},
		{"resolved without from", &Record{Scope: "s", Key: "k", State: StateFailed, Resolved: &Resolution{}, Result: &Result{}}},
		{"binary strings", &Record{Scope: "\xff\xfe", Key: "k\x01", State: StateSucceeded, Body: body, BodySHA: sha256.Sum256(body)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := encode(nil, tt.rec)
			got, err := decode(enc)
			require.NoError(t, err)
			require.Equal(t, tt.rec, got)
			require.Equal(t, enc, encode(nil, got), "encoding is deterministic")

			st, review, err := decodeState(enc)
			require.NoError(t, err)
			require.Equal(t, tt.rec.State, st)
			require.Equal(t, tt.rec.Review, review)
			require.Equal(t, appendHeader(nil, tt.rec.Header), encodedHeader(enc), "encodedHeader")
		})
	}
}

func TestEncodeLocalTimesComeBackUTC(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	r := &Record{Scope: "s", Key: "k", State: StatePending, Created: time.Now().In(loc)}
	got, err := decode(encode(nil, r))
	require.NoError(t, err)
	require.True(t, got.Created.Equal(r.Created), "Created = %v; want %v", got.Created, r.Created)
	require.Equal(t, time.UTC, got.Created.Location())
}

func TestDecodeRejects(t *testing.T) {
	enc := encode(nil, fullRecord())
	// Every truncation is corrupt, never a panic.
	for i := range len(enc) {
		_, err := decode(enc[:i])
		require.ErrorIs(t, err, ErrCorrupt, "decode(first %d of %d bytes)", i, len(enc))
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"trailing byte", append(encode(nil, fullRecord()), 0), ErrCorrupt},
		{"bad magic", append([]byte{'{'}, enc[1:]...), ErrCorrupt},
		{"version 0", append([]byte{magic0, magic1, 0}, enc[3:]...), ErrCorrupt},
		{"newer version", append([]byte{magic0, magic1, recordVersion + 1}, enc[3:]...), ErrVersion},
		{"bad state", append([]byte{magic0, magic1, recordVersion, 9}, enc[4:]...), ErrCorrupt},
		{"empty state", append([]byte{magic0, magic1, recordVersion, 0}, enc[4:]...), ErrCorrupt},
		{"huge length", []byte{magic0, magic1, recordVersion, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, ErrCorrupt},
		{"overlong varint", []byte{magic0, magic1, recordVersion, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrCorrupt},
		// Processing is recorded only as a contradiction (ApplyConfirmation),
		// and only version 4 holds one.
		{"processing confirmation that agreed", encode(nil, &Record{Scope: "s", Key: "k", State: StateFailed,
			Confirmations: []Confirmation{{State: StateProcessing, Source: "s", EventID: "e", At: t0, Effect: ConfirmAgreed}}}), ErrCorrupt},
		{"processing confirmation in version 3", func() []byte {
			b := encode(nil, &Record{Scope: "s", Key: "k", State: StateFailed,
				Confirmations: []Confirmation{{State: StateProcessing, Source: "s", EventID: "e", At: t0, Effect: ConfirmConflicted}}})
			b[2] = 3
			return b
		}(), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode(tt.b)
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// A version 1 record cannot hold the flags version 2 added: reading them
// from one means the bytes are damaged, not that the flags were set.
func TestDecodeVersion1(t *testing.T) {
	plain := &Record{Scope: "s", Key: "k", State: StateUnknown,
		Attempts: []Attempt{{Number: 1, Kind: AttemptSubmit, Wrote: true, Done: true, Status: 504}},
		Result:   &Result{StatusCode: 504}}
	v1 := encodeOld(t, plain, 1)
	got, err := decode(v1)
	require.NoError(t, err, "a version 1 record without the new flags")
	require.Equal(t, plain, got)

	for _, tt := range []struct {
		name string
		set  func(*Record)
	}{
		{"refused attempt", func(r *Record) { r.Attempts[0].Refused = true }},
		{"replayed attempt", func(r *Record) { r.Attempts[0].Replayed = true }},
		{"replayed result", func(r *Record) { r.Result.Replayed = true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := clone(plain)
			tt.set(r)
			_, err := decode(encodeOld(t, r, 1))
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// encodeOld encodes r, which must hold nothing the versions after version
// added, as record version version (1 or 2).
func encodeOld(tb testing.TB, r *Record, version byte) []byte {
	tb.Helper()
	require.Empty(tb, r.Confirmations, "a version %d record cannot hold confirmations", version)
	require.Empty(tb, r.Trace, "a version %d record cannot hold a trace", version)
	b := encode(nil, r)
	b[2] = version
	return b[:len(b)-2] // version 3's empty confirmation count and empty Trace
}

// A version 2 record (written before confirmations and trace contexts
// existed) decodes with neither; version 3's bytes in one are damage.
func TestDecodeVersion2(t *testing.T) {
	plain := &Record{Scope: "s", Key: "k", State: StateSucceeded, Settled: t0, Result: &Result{ResourceID: "r", Replayed: true}}
	got, err := decode(encodeOld(t, plain, 2))
	require.NoError(t, err, "a version 2 record")
	require.Equal(t, plain, got)

	r := clone(plain)
	r.Confirmations = []Confirmation{{State: StateSucceeded, Source: "s", EventID: "e", At: t0, Effect: ConfirmAgreed}}
	b := encode(nil, r)
	b[2] = 2
	_, err = decode(b)
	require.ErrorIs(t, err, ErrCorrupt, "a version 2 record with confirmations")

	_, err = decode(append(encodeOld(t, plain, 2), 0))
	require.ErrorIs(t, err, ErrCorrupt, "a version 2 record with a trace field")
}

// FuzzDecodeRecord checks that decode never panics, and that whatever it
// accepts survives another encode and decode unchanged.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encode(nil, fullRecord()))
	f.Add(encode(nil, &Record{Scope: "s", Key: "k", State: StatePending}))
	f.Add([]byte{})
	f.Add([]byte{magic0, magic1, formatVersion})
	f.Add([]byte{magic0, magic1, formatVersion + 1, 1})
	f.Add([]byte(`{"scope":"s","key":"k"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode(b)
		if err != nil {
			if r != nil {
				t.Fatalf("decode returned a record and an error")
			}
			return
		}
		enc := encode(nil, r)
		r2, err := decode(enc)
		if err != nil {
			t.Fatalf("decode(encode(decode(b))): %v", err)
		}
		require.Equal(t, r, r2)
		if _, _, err := decodeState(b); err != nil {
			t.Fatalf("decodeState rejects what decode accepts: %v", err)
		}
		if h := encodedHeader(enc); !bytes.Equal(h, appendHeader(nil, r.Header)) {
			t.Fatalf("encodedHeader = %x; want the header's encoding %x", h, appendHeader(nil, r.Header))
		}
	})
}

func TestTimeKeyOrder(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), // clamped with the zero time
		time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 0),
		time.Unix(0, 0),
		time.Unix(0, 1),
		t0,
		t0.Add(time.Nanosecond),
		time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), // clamped to the end
	}
	for i := 1; i < len(times); i++ {
		require.LessOrEqual(t, timeKey(times[i-1]), timeKey(times[i]), "timeKey(%v) <= timeKey(%v)", times[i-1], times[i])
	}
	require.Less(t, timeKey(t0), timeKey(t0.Add(time.Nanosecond)))
	require.Less(t, timeKey(time.Unix(-1, 0)), timeKey(time.Unix(0, 0)))
}

// A record is written in the oldest version that holds it: a build that
// knows only version 3 reads every record but one with a processing
// confirmation, which it refuses as newer rather than as damaged.
func TestRecordVersionWritten(t *testing.T) {
	r := &Record{Scope: "s", Key: "k", State: StateFailed,
		Confirmations: []Confirmation{{State: StateSucceeded, Source: "s", EventID: "e", At: t0, Effect: ConfirmConflicted}}}
	require.Equal(t, byte(3), encode(nil, r)[2], "without a processing confirmation")
	r.Confirmations = append(r.Confirmations, Confirmation{State: StateProcessing, Source: "idem: server response", EventID: "attempt 2", At: t0, Effect: ConfirmConflicted})
	enc := encode(nil, r)
	require.Equal(t, byte(4), enc[2], "with one")
	got, err := decode(enc)
	require.NoError(t, err)
	require.Equal(t, r, got)

	// A key another request holds, said by the server's answer: a build
	// that knows only version 4 would read it as an answer that agreed.
	r.Confirmations = append(r.Confirmations, Confirmation{State: StateFailed, Source: "idem: server response", EventID: "attempt 3", At: t0,
		Effect: ConfirmConflicted, KeyInUse: true})
	enc = encode(nil, r)
	require.Equal(t, byte(5), enc[2], "with a key in use")
	got, err = decode(enc)
	require.NoError(t, err)
	require.Equal(t, r, got)
	enc[2] = 4
	_, err = decode(enc)
	require.ErrorIs(t, err, ErrCorrupt, "its flag in version 4")

	// An attempt net/http sent twice: a build that knows only version 5
	// would count it as one copy, and Confirm would clear the review of
	// an operation that may have charged twice.
	r.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: t0, Wrote: true, Done: true, Resent: true, Status: 500}}
	enc = encode(nil, r)
	require.Equal(t, byte(6), enc[2], "with an attempt net/http resent")
	got, err = decode(enc)
	require.NoError(t, err)
	require.Equal(t, r, got)
	enc[2] = 5
	_, err = decode(enc)
	require.ErrorIs(t, err, ErrCorrupt, "its flag in version 5")
}
