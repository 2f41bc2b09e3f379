package idem

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem/journal"
)

// The judge's words that begin a journaled attempt's error are read back
// by pastOf to count the refusals after a send that may have executed: a
// credential that is one of their words (a Basic user "a", sent with no
// password, or a sandbox key "key") blanked in them would have a 409
// saying the key was used count as none, and a 400 saying the key's
// request still runs count as a refusal. The server's words after them
// are blanked; the judge's are kept.
func TestBlankSentKeepsTheJudgesWords(t *testing.T) {
	for _, tc := range []struct {
		words    string
		status   int
		refusals int
	}{
		{conflictAfterSend, http.StatusConflict, 1},
		{stateAfterSend, http.StatusConflict, 1},
		{inFlightAfterSend, http.StatusBadRequest, 0},
	} {
		for _, secret := range []string{"a", "key", "idem"} {
			ex := exchange{err: fmt.Errorf("%s: %d: %s not accepted", tc.words, tc.status, secret), sent: []string{secret}}
			var out Outcome
			ex.blankSent(&out)
			text := ex.err.Error()
			if !strings.HasPrefix(text, tc.words) || !strings.HasSuffix(text, ": REDACTED not accepted") {
				t.Errorf("secret %q: error %q; want %q, then the server's words blanked", secret, text, tc.words)
			}
			a := journal.Attempt{Kind: journal.AttemptSubmit, Done: true, Refused: true, Status: tc.status, Err: text}
			if got := (past{maybeExecuted: true}).after(a).refusals; got != tc.refusals {
				t.Errorf("secret %q, %d: refusals = %d; want %d", secret, tc.status, got, tc.refusals)
			}
		}
	}
}
