package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestShowKeyPlacement: an operation left unsent because its Client puts
// the key elsewhere than the one that journaled it (idem.ReviewKeyMoved)
// is settled by a person who must know where it went: show and show
// -json print the journaled placement, in file mode and through the
// admin handler; one journaled before placements were prints none.
func TestShowKeyPlacement(t *testing.T) {
	path := journalOfUnknowns(t, map[string]func(*journal.Record){
		"k-placed": func(r *journal.Record) { r.KeyPlacement = "header Paypal-Request-Id" },
		"k-older":  func(*journal.Record) {},
	})
	eachShowMode(t, path, func(mode string, args []string) {
		stdout, stderr, code := runIdem(t, append(args, "show", "k-placed")...)
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, `(?m)^key placement:\s+header Paypal-Request-Id$`, stdout, mode)

		stdout, stderr, code = runIdem(t, append(args, "show", "-json", "k-placed")...)
		require.Equal(t, 0, code, stderr)
		var got struct {
			KeyPlacement string `json:"key_placement"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
		require.Equal(t, "header Paypal-Request-Id", got.KeyPlacement, mode)

		stdout, stderr, code = runIdem(t, append(args, "show", "k-older")...)
		require.Equal(t, 0, code, stderr)
		require.NotContains(t, stdout, "key placement:", mode)
	})
}
