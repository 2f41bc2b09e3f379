package idem

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// Which open operations a removal of an endpoint ignoring the key flags
// (sentToIgnoring): a lost answer (written, no answer) to the endpoint,
// unflagged or flagged for a reason that does not stop a caller's
// resend; not one whose flag stops every resend on its own, which a
// drive leaves as it is: ReviewFinalAnswer (its detail after the colon)
// comes from the server's replay of its stored answer for the key, which
// shows the endpoint keeps the key, so relabelled ReviewKeyIgnored it
// would teach the endpoint back as ignoring it once forgotten.
func TestSentToIgnoringFlagsLeft(t *testing.T) {
	const url = "https://api.solidgate.example/api/v1/charge"
	e := "POST " + url
	for _, tc := range []struct {
		review string
		flags  bool
	}{
		{"", true},
		{ReviewRefusedAfterSend, true},
		{ReviewDeadlinePassed, true},
		{ReviewKeyIgnored, false},
		{ReviewKeyInUse, false},
		{ReviewKeyExpired, false},
		{ReviewFinalAnswer + ": 500 Internal Server Error", false},
	} {
		rec := &journal.Record{Scope: DefaultScope, Key: "a", Method: "POST", URL: url, State: journal.StateUnknown, Review: tc.review,
			Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Wrote: true, Done: true}}}
		require.Equal(t, tc.flags, sentToIgnoring(rec, e), "review %q", tc.review)
	}
}
