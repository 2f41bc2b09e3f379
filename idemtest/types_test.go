package idemtest

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestTypesMirrorTheServers: the exported types are copies of the fake
// server's, so that go doc shows their fields; a field added to one side
// only would be dropped silently at the boundary.
func TestTypesMirrorTheServers(t *testing.T) {
	pairs := []struct{ ours, theirs any }{
		{Fault{}, fakeserver.Fault{}},
		{Profile{}, fakeserver.Profile{}},
		{Stats{}, fakeserver.Stats{}},
		{KeyStats{}, fakeserver.KeyStats{}},
		{Request{}, fakeserver.Request{}},
		{Behavior{}, fakeserver.Behavior{}},
		{Webhook{}, fakeserver.Webhook{}},
		{WebhookEvent{}, fakeserver.Event{}},
		{WebhookStats{}, fakeserver.WebhookStats{}},
	}
	kindOurs, kindTheirs := reflect.TypeFor[FaultKind](), reflect.TypeFor[fakeserver.FaultKind]()
	for _, p := range pairs {
		ours, theirs := reflect.TypeOf(p.ours), reflect.TypeOf(p.theirs)
		require.Equal(t, theirs.NumField(), ours.NumField(), "%v: fields", ours)
		for i := range ours.NumField() {
			o, th := ours.Field(i), theirs.Field(i)
			require.Equal(t, th.Name, o.Name, "%v field %d", ours, i)
			require.Equal(t, th.Tag, o.Tag, "%v.%s tag", ours, o.Name)
			want := th.Type
			switch {
			case want == kindTheirs:
				want = kindOurs
			case want.Kind() == reflect.Map && want.Key() == kindTheirs:
				want = reflect.MapOf(kindOurs, want.Elem())
			}
			require.Equal(t, want, o.Type, "%v.%s type", ours, o.Name)
		}
	}
}

// TestConversionsKeepEveryField: every field, set, survives the trip to the
// server's type and back. The types converted by a Go conversion
// (convert.go) need no such check: one field more on one side does not
// compile.
func TestConversionsKeepEveryField(t *testing.T) {
	f := Fault{Kind: SlowProcessing, Count: 3, Key: "k", Query: true, Delay: time.Second, RetryAfter: 2 * time.Second, HTTPDate: true}
	require.Equal(t, f, faultOf(f.internal()))
	p := Profile{Rates: map[FaultKind]float64{Decline: 0.5}, Delay: time.Second, RetryAfter: time.Minute, HTTPDate: true}
	require.Equal(t, fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.Decline: 0.5}, Delay: time.Second, RetryAfter: time.Minute, HTTPDate: true}, p.internal())
	require.Nil(t, Profile{}.internal().Rates)

	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	r := fakeserver.Request{Method: "POST", Path: "/p", Scope: "s", Key: "k", RawKey: `"k"`, BodySHA256: [32]byte{1}, Status: 201, Fault: fakeserver.Decline, At: at}
	require.Equal(t, Request{Method: "POST", Path: "/p", Scope: "s", Key: "k", RawKey: `"k"`, BodySHA256: [32]byte{1}, Status: 201, Fault: Decline, At: at}, requestOf(r))
}

// TestConstantsAreTheServersKinds: each constant here is the server's, in
// the server's order.
func TestConstantsAreTheServersKinds(t *testing.T) {
	ours := []FaultKind{
		DropAfterCommit, DelayResponse, ErrorAfterCommit, ErrorBeforeCommit, Throttle, Unavailable,
		QueryLag, SlowProcessing, GarbageBody, TruncatedBody, Decline, Reject409, Preempt,
		StillRunning, LostAnswerLag, StillRunningDecline, StillRunningProcessing,
	}
	theirs := fakeserver.FaultKinds()
	require.Len(t, ours, len(theirs))
	for i, k := range theirs {
		require.Equal(t, string(k), string(ours[i]))
		require.Equal(t, k.Description(), ours[i].Description())
	}
	require.Equal(t, ours, FaultKinds())
}

// TestShortWindowRetentionIsTheServers: the constant is spelt out here for
// go doc; it must stay the preset's window.
func TestShortWindowRetentionIsTheServers(t *testing.T) {
	require.Equal(t, fakeserver.ShortWindowRetention, ShortWindowRetention)
	require.Equal(t, ShortWindowRetention, ShortWindow().Retention)
}
