package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestOneNamePerFault: for every fault, the kind's string, the rate flag,
// the kind POST /_faults takes and the name -h prints are the same word.
// The delay fault had three names: DelayResponse, -delay-response and
// "delay" (and {"kind":"delay-response"} was refused). That the word is
// the Go constant's name in kebab case is the fake server's test
// (TestFaultKindIsItsConstantName in internal/fakeserver).
func TestOneNamePerFault(t *testing.T) {
	var help bytes.Buffer
	printUsage(&help)
	srv, err := fakeserver.New(fakeserver.Config{})
	require.NoError(t, err)
	for _, kind := range fakeserver.FaultKinds() {
		word := string(kind)
		t.Run(word, func(t *testing.T) {
			require.Equal(t, word, rateFlag(kind), "rate flag")
			require.Contains(t, help.String(), "\n  -"+word+" rate ", "-h")

			opts, err := parseFlags([]string{"-" + word, "0.5"})
			require.NoError(t, err)
			require.Equal(t, map[fakeserver.FaultKind]float64{kind: 0.5}, opts.cfg.Profile.Rates)

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
