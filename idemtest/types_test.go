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
// server's type and back.
func TestConversionsKeepEveryField(t *testing.T) {
	f := Fault{Kind: SlowProcessing, Count: 3, Key: "k", Query: true, Delay: time.Second, RetryAfter: 2 * time.Second, HTTPDate: true}
	require.Equal(t, f, faultOf(f.internal()))
	b := Behavior{Name: "n", StoreErrors: true, NoBodyCompare: true, ConflictStatus: 409, Retention: time.Hour, KeyMember: "m", OpenOnly: true}
	require.Equal(t, b, behaviorOf(b.internal()))
	p := Profile{Rates: map[FaultKind]float64{Decline: 0.5}, Delay: time.Second, RetryAfter: time.Minute, HTTPDate: true}
	require.Equal(t, fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.Decline: 0.5}, Delay: time.Second, RetryAfter: time.Minute, HTTPDate: true}, p.internal())
	require.Nil(t, Profile{}.internal().Rates)

	st := fakeserver.Stats{Requests: 1, Submits: 2, Queries: 3, SideEffects: 4, Keys: 5, MaxEffectsPerKey: 6, Replays: 7, Conflicts: 8, Refusals: 11, ForeignEffects: 9, MaxSubmitsAfterFinal: 10}
	require.Equal(t, Stats{Requests: 1, Submits: 2, Queries: 3, SideEffects: 4, Keys: 5, MaxEffectsPerKey: 6, Replays: 7, Conflicts: 8, Refusals: 11, ForeignEffects: 9, MaxSubmitsAfterFinal: 10}, statsOf(st))
	w := Webhook{URL: "http://127.0.0.1:1/", Secret: []byte("s"), Lose: 0.1, Duplicate: 0.2, Delay: time.Second, Retries: 2, RetryWait: time.Millisecond, Timeout: time.Minute}
	require.Equal(t, &fakeserver.Webhook{URL: w.URL, Secret: w.Secret, Lose: 0.1, Duplicate: 0.2, Delay: time.Second, Retries: 2, RetryWait: time.Millisecond, Timeout: time.Minute}, w.internal())
	ws := fakeserver.WebhookStats{Events: 1, Delivered: 2, Duplicated: 3, Lost: 4, Failed: 5, Retries: 6}
	require.Equal(t, WebhookStats{Events: 1, Delivered: 2, Duplicated: 3, Lost: 4, Failed: 5, Retries: 6}, webhookStatsOf(ws))
	ks := fakeserver.KeyStats{Effects: 1, ForeignEffects: 2, SubmitsAfterFinal: 3, Conflicts: 4, Refusals: 5}
	require.Equal(t, KeyStats{Effects: 1, ForeignEffects: 2, SubmitsAfterFinal: 3, Conflicts: 4, Refusals: 5}, keyStatsOf(ks))
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
