package journal

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// randomRecord builds a valid record with random content, including the
// shapes decode normalises: empty but non-nil slices and maps, local and
// monotonic times, extreme times.
func randomRecord(rng *rand.Rand) *Record {
	str := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	bytesOf := func() []byte {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, 1+rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("X", 3600), time.FixedZone("Y", -5*3600-1800)}
	tm := func() time.Time {
		switch rng.IntN(6) {
		case 0:
			return time.Time{}
		case 1:
			return time.Now() // with a monotonic reading
		case 2:
			return time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)
		case 3:
			return time.Date(9999, 12, 31, 23, 59, 59, 999999999, zones[rng.IntN(len(zones))])
		}
		return time.Unix(rng.Int64N(1<<40)-1<<39, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
	}
	states := []State{StatePending, StateProcessing, StateSucceeded, StateFailed, StateUnknown}
	body := bytesOf()
	r := &Record{
		Scope: "s" + strings.ReplaceAll(str(), "\x00", ""), Key: "k" + strings.ReplaceAll(str(), "\x00", ""), Ref: str(), Method: str(), URL: str(), QueryURL: str(),
		Body: body, BodySHA: sha256.Sum256(body),
		State: states[rng.IntN(len(states))], Review: str(),
		Created: tm(), FirstSent: tm(), Updated: tm(), Settled: tm(), NextDue: tm(),
	}
	switch rng.IntN(3) {
	case 0:
	case 1:
		r.Header = http.Header{}
	default:
		r.Header = http.Header{}
		for range 1 + rng.IntN(4) {
			vs := make([]string, rng.IntN(3))
			for i := range vs {
				vs[i] = str()
			}
			r.Header[fmt.Sprint("H", rng.IntN(100))] = vs
		}
	}
	if n := rng.IntN(4); n > 0 || rng.IntN(2) == 0 {
		r.Attempts = make([]Attempt, n)
		kinds := []AttemptKind{"", AttemptSubmit, AttemptQuery, "other"}
		for i := range r.Attempts {
			r.Attempts[i] = Attempt{
				Number: rng.IntN(10) - 1, Kind: kinds[rng.IntN(len(kinds))], Start: tm(),
				Wrote: rng.IntN(2) == 0, Done: rng.IntN(2) == 0, Status: rng.IntN(600), Err: str(),
				RetryAfter: time.Duration(rng.Int64()), Duration: time.Duration(-rng.Int64()),
			}
		}
	}
	if rng.IntN(2) == 0 {
		r.Result = &Result{ResourceID: str(), StatusCode: rng.IntN(600), Body: bytesOf(), Reason: str()}
	}
	if rng.IntN(3) == 0 {
		r.Resolved = &Resolution{By: str(), Reason: str(), At: tm(), From: append([]State{""}, states...)[rng.IntN(6)]}
	}
	if r.State.Terminal() && r.Settled.IsZero() {
		r.Settled = t0
	}
	return r
}

// TestCloneIsDecodeOfEncode: what a write returns (clone, or asStored for
// Update's) is exactly what a later Get returns (decode of the stored
// bytes).
func TestCloneIsDecodeOfEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := []*Record{fullRecord(), {Scope: "s", Key: "k", State: StatePending, BodySHA: sha256.Sum256(nil)}}
	for range 5000 {
		recs = append(recs, randomRecord(rng))
	}
	for i, r := range recs {
		require.NoError(t, validate(r), "record %d", i)
		want, err := decode(encode(nil, r))
		require.NoError(t, err, "record %d", i)
		got := clone(r)
		require.Equal(t, want, got, "record %d: clone differs from decode(encode())", i)
		require.Equal(t, encode(nil, r), encode(nil, got), "record %d: encoding", i)
		// asStored changes its argument: give it a copy sharing r's
		// slices, and check that r (what fn may have taken them from) is
		// left as it was.
		in := *r
		starts := make([]time.Time, len(r.Attempts))
		for j, a := range r.Attempts {
			starts[j] = a.Start
		}
		nilValues := map[string]bool{}
		for k, vs := range r.Header {
			nilValues[k] = vs == nil
		}
		res := r.Result
		var resBody []byte
		if res != nil {
			resBody = res.Body
		}
		require.Equal(t, want, asStored(&in), "record %d: asStored differs from decode(encode())", i)
		for j, a := range r.Attempts {
			require.True(t, a.Start == starts[j], "record %d: asStored changed attempt %d's Start in the slice it was given", i, j)
		}
		for k, vs := range r.Header {
			require.Equal(t, nilValues[k], vs == nil, "record %d: asStored changed the header it was given", i)
		}
		require.Same(t, res, r.Result)
		if res != nil {
			require.Equal(t, resBody == nil, res.Body == nil, "record %d: asStored changed the result it was given", i)
		}
	}
}

// TestCloneIsDeep: changing a clone in place leaves the original alone, and
// the other way round.
func TestCloneIsDeep(t *testing.T) {
	orig := fullRecord()
	want := encode(nil, orig)
	c := clone(orig)
	scribbleAll(c)
	require.Equal(t, want, encode(nil, orig), "original after changing the clone")

	c = clone(orig)
	wantClone := encode(nil, c)
	scribbleAll(orig)
	require.Equal(t, wantClone, encode(nil, c), "clone after changing the original")
}

func scribbleAll(r *Record) {
	for k := range r.Header {
		for i := range r.Header[k] {
			r.Header[k][i] = "scribbled"
		}
		r.Header[k] = append(r.Header[k], "more")
	}
	r.Header["New"] = []string{"x"}
	for i := range r.Body {
		r.Body[i] = 'X'
	}
	for i := range r.Attempts {
		r.Attempts[i].Status = 999
		r.Attempts[i].Start = r.Attempts[i].Start.Add(time.Hour)
	}
	r.Result.Body[0] = 'X'
	r.Result.ResourceID = "scribbled"
	r.Resolved.By = "scribbled"
}
