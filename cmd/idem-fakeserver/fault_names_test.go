package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
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

// TestOneNamePerFault: for every fault, the Go constant's name (in kebab
// case), the kind's string, the rate flag, the kind POST /_faults takes and
// the name -h prints are the same word. The delay fault had three names:
// DelayResponse, -delay-response and "delay" (and {"kind":"delay-response"}
// was refused).
func TestOneNamePerFault(t *testing.T) {
	constants := []struct {
		name string
		kind fakeserver.FaultKind
	}{
		{"DropAfterCommit", fakeserver.DropAfterCommit},
		{"DelayResponse", fakeserver.DelayResponse},
		{"ErrorAfterCommit", fakeserver.ErrorAfterCommit},
		{"ErrorBeforeCommit", fakeserver.ErrorBeforeCommit},
		{"Throttle", fakeserver.Throttle},
		{"Unavailable", fakeserver.Unavailable},
		{"QueryLag", fakeserver.QueryLag},
		{"SlowProcessing", fakeserver.SlowProcessing},
		{"GarbageBody", fakeserver.GarbageBody},
		{"TruncatedBody", fakeserver.TruncatedBody},
		{"Decline", fakeserver.Decline},
		{"Reject409", fakeserver.Reject409},
		{"Preempt", fakeserver.Preempt},
	}
	require.Len(t, constants, len(fakeserver.FaultKinds()), "a fault is missing from this table")

	var help bytes.Buffer
	printUsage(&help)
	srv, err := fakeserver.New(fakeserver.Config{})
	require.NoError(t, err)
	for i, c := range constants {
		word := kebab(c.name)
		t.Run(word, func(t *testing.T) {
			require.Equal(t, fakeserver.FaultKinds()[i], c.kind, "table order")
			require.Equal(t, word, string(c.kind), "kind")
			require.Equal(t, word, rateFlag(c.kind), "rate flag")
			require.Contains(t, help.String(), "\n  -"+word+" rate ", "-h")

			opts, err := parseFlags([]string{"-" + word, "0.5"})
			require.NoError(t, err)
			require.Equal(t, map[fakeserver.FaultKind]float64{c.kind: 0.5}, opts.cfg.Profile.Rates)

			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_faults", strings.NewReader(`{"kind":"`+word+`"}`)))
			require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
		})
	}
	// The former names are not listed.
	for _, name := range formerRateFlags {
		require.NotContains(t, help.String(), "-"+name+" ")
	}
}
