package fakeserver_test

import (
	"net/http"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// kebab turns a Go constant name into the fault word: DelayResponse is
// "delay-response", Reject409 "reject-409".
func kebab(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && (unicode.IsUpper(r) || unicode.IsDigit(r) && !unicode.IsDigit(rune(name[i-1]))) {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// faultConstants names the Go constant of every fault kind. Adding a kind
// without adding it here fails TestFaultKindIsItsConstantName.
var faultConstants = map[string]fakeserver.FaultKind{
	"DropAfterCommit":        fakeserver.DropAfterCommit,
	"DelayResponse":          fakeserver.DelayResponse,
	"ErrorAfterCommit":       fakeserver.ErrorAfterCommit,
	"ErrorBeforeCommit":      fakeserver.ErrorBeforeCommit,
	"Throttle":               fakeserver.Throttle,
	"Unavailable":            fakeserver.Unavailable,
	"QueryLag":               fakeserver.QueryLag,
	"SlowProcessing":         fakeserver.SlowProcessing,
	"GarbageBody":            fakeserver.GarbageBody,
	"TruncatedBody":          fakeserver.TruncatedBody,
	"Decline":                fakeserver.Decline,
	"Reject409":              fakeserver.Reject409,
	"Preempt":                fakeserver.Preempt,
	"StillRunning":           fakeserver.StillRunning,
	"LostAnswerLag":          fakeserver.LostAnswerLag,
	"StillRunningDecline":    fakeserver.StillRunningDecline,
	"StillRunningProcessing": fakeserver.StillRunningProcessing,
}

// TestFaultKindIsItsConstantName: one word per fault. The kind's string
// (the JSON kind, the rate flag) is its Go constant's name in kebab case;
// it was "503", "429", "500-after-commit" and "delay" for four of them,
// and the last had a third name as a flag.
func TestFaultKindIsItsConstantName(t *testing.T) {
	require.Len(t, fakeserver.FaultKinds(), len(faultConstants), "faultConstants misses a kind")
	for name, k := range faultConstants {
		require.Equal(t, kebab(name), string(k), "constant %s", name)
		require.Contains(t, fakeserver.FaultKinds(), k)
	}
}

// TestRenamedKindIsRefusedNamingTheNewWord: a former name is not an alias
// (one name per fault); the error names the word to use instead, in Go,
// over HTTP and in a profile.
func TestRenamedKindIsRefusedNamingTheNewWord(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	for old, now := range map[string]fakeserver.FaultKind{
		"503": fakeserver.Unavailable, "429": fakeserver.Throttle, "delay": fakeserver.DelayResponse,
		"500-after-commit": fakeserver.ErrorAfterCommit, "500-before-commit": fakeserver.ErrorBeforeCommit,
	} {
		got, ok := fakeserver.Renamed(old)
		require.True(t, ok, old)
		require.Equal(t, now, got)
		want := `fault kind "` + old + `" was renamed "` + string(now) + `"`

		err := h.srv.Inject(fakeserver.Fault{Kind: fakeserver.FaultKind(old)})
		require.ErrorContains(t, err, want)
		err = h.srv.SetProfile(fakeserver.Profile{Rates: map[fakeserver.FaultKind]float64{fakeserver.FaultKind(old): 0.5}})
		require.ErrorContains(t, err, want)

		r := h.do(t, call{path: "/_faults", body: `{"kind":"` + old + `"}`})
		require.Equal(t, http.StatusBadRequest, r.status)
		require.Contains(t, r.errorMessage(t), want)
	}
	_, ok := fakeserver.Renamed("unavailable")
	require.False(t, ok)
	// Nothing was scripted: the next submit executes.
	require.Equal(t, http.StatusCreated, h.submit(t, "k1", "{}").status)
}

// TestFaultJSONErrorsNameTheField: encoding/json's type errors named the
// internal type ("Go struct field faultJSON.retry_after of type string");
// the answer names the field as the caller wrote it and what it takes.
func TestFaultJSONErrorsNameTheField(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	for body, want := range map[string]string{
		`{"kind":"throttle","retry_after":2}`:   `invalid fault: retry_after: got a JSON number, want a duration string such as "1s"`,
		`{"kind":"throttle","delay":false}`:     `invalid fault: delay: got a JSON bool, want a duration string such as "2s"`,
		`{"kind":"throttle","count":"2"}`:       "invalid fault: count: got a JSON string, want a whole number",
		`{"kind":"throttle","count":1.5}`:       "invalid fault: count: got a JSON number, want a whole number",
		`{"kind":7}`:                            `invalid fault: kind: got a JSON number, want a string such as "unavailable"`,
		`{"kind":"throttle","query":"yes"}`:     "invalid fault: query: got a JSON string, want true or false",
		`{"kind":"throttle","http_date":1}`:     "invalid fault: http_date: got a JSON number, want true or false",
		`["throttle"]`:                          `invalid fault: got a JSON array, want an object such as {"kind":"unavailable","retry_after":"2s"}`,
		`{"kind":"throttle","retryAfter":"1s"}`: `invalid fault: json: unknown field "retryAfter"`,
	} {
		r := h.do(t, call{path: "/_faults", body: body})
		require.Equal(t, http.StatusBadRequest, r.status, body)
		msg := r.errorMessage(t)
		require.Equal(t, want, msg, body)
		require.NotContains(t, msg, "faultJSON", body)
	}
}
