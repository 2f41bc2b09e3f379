package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestRatesThatSumToOneAreAccepted: rates that sum to exactly 1
// (0.1 + 0.34 + 0.56) were refused at random. parseFlags added them in map
// order, with no tolerance, and floating-point addition is not
// associative: in two orders of six the sum is 1.0000000000000002 > 1, so
// the same command line exited 2 one run and served the next. The server
// itself (Profile.validate) allows for rounding.
func TestRatesThatSumToOneAreAccepted(t *testing.T) {
	args := []string{"-drop-after-commit", "0.1", "-error-after-commit", "0.34", "-decline", "0.56"}
	for range 200 {
		opts, err := parseFlags(args)
		require.NoError(t, err)
		require.InDelta(t, 0.56, opts.cfg.Profile.Rates[fakeserver.Decline], 0)
	}
	// A sum really over 1 is still refused.
	_, err := parseFlags([]string{"-drop-after-commit", "0.5", "-decline", "0.5000001"})
	require.ErrorContains(t, err, "want at most 1")
}
