package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The words idem journals with a first attempt's "the order exists
// already" ("idem: the server says the order exists already: …") are
// read back from the journal on each later pass (pastOf's orderPaid),
// and so are those of "the order is paid already" and of an endpoint
// that ignores the key. What the request carried is blanked in them
// where it stands as a word, and only the three refusals after a send
// kept their words whole: a credential that is one of theirs (modelled:
// a sandbox whose key is the app's own name, "idem", sent as the Basic
// user with no password, as Stripe sends its key) turned them into
// "REDACTED: the server says …". The refusal read so was lost: the
// result endpoint's "not found" past the lag no longer failed it, and
// the payout stayed unknown for ever, asked again on every Resume.
// Kept, it fails as it does with any other credential.
func TestOrderExistsWordsSurviveACredentialThatIsOneOfThem(t *testing.T) {
	s := &createOnly{made: map[string]string{"po_1": "other"}}
	srv := retryingSidecar(t, s.serve)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithRequestHook(func(r *http.Request) error {
		r.SetBasicAuth("idem", "")
		return nil
	}))
	res, err := c.Submit(t.Context(), createPayout(srv.URL, true))
	requireFailedPastTheLag(t, c, clock, res, err, "pre-conditions you specified did not hold", "exists already")
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.puts, 1, "never resent")
	require.Equal(t, 2, s.queries, "one query in the call, one past the lag; none once failed")
}
