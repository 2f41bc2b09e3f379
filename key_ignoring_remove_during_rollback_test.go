package idem_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// A newer idem sends payment a to a Solidgate-shaped endpoint that
// ignores the key (fixedAfterIncident) and loses its answer; k2's answer
// teaches it the endpoint, which it journals. It is rolled back before a
// visit flags a, so a is an open record this release does not read, and
// ForEachOpen skips it. The provider fixes the endpoint and the operator
// removes it with this release: the tool on the journal
// (RemoveKeyIgnoring, idem key-ignoring remove) or the rolled-back
// service (ForgetKeyIgnoring, the admin handler). It flagged nothing,
// a unseen, and removed the endpoint; the newer idem, running again,
// knew the endpoint no more and its Resume resent a under the same key,
// which the endpoint had kept for nothing: requests a, k2, a; 3 charges.
// The removal is refused while an open record this release cannot read
// exists (an error matching journal.ErrVersion that says to remove it
// with the newer idem), the endpoint kept: the newer idem's Resume flags
// a ReviewKeyIgnored, never resent. Requests a, k2; 2 charges.
func TestRemoveKeyIgnoringRefusedOverOpenRecordFromNewerIdem(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, js *journal.Store, c *idem.Client, endpoint string) error
	}{
		{"RemoveKeyIgnoring", func(t *testing.T, js *journal.Store, _ *idem.Client, endpoint string) error {
			removed, flagged, err := idem.RemoveKeyIgnoring(t.Context(), js, endpoint)
			require.False(t, removed, "RemoveKeyIgnoring(): removed")
			require.Zero(t, flagged, "RemoveKeyIgnoring(): flagged")
			return err
		}},
		{"ForgetKeyIgnoring", func(t *testing.T, _ *journal.Store, c *idem.Client, endpoint string) error {
			known, err := c.ForgetKeyIgnoring(t.Context(), endpoint)
			require.False(t, known, "ForgetKeyIgnoring(): known")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFixedAfterIncident(t)
			path := filepath.Join(t.TempDir(), "idem.journal")
			charge := s.srv.URL + "/api/v1/charge"
			endpoint := "POST " + charge
			open := func() (*journal.Store, *idem.Client) {
				js, err := journal.Open(path)
				require.NoError(t, err)
				c, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
				require.NoError(t, err)
				return js, c
			}
			shut := func(js *journal.Store, c *idem.Client) {
				require.NoError(t, c.Close())
				require.NoError(t, js.Close())
			}

			js, c := open()
			s.submitLost(t, c, "a", charge, `{"amount":100}`)
			_, err := c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":5}`)})
			require.NoError(t, err, "Submit(k2): its answer says the key is ignored")
			shut(js, c) // waits for the endpoint's journaling
			written := storedRecord(t, path, "open.seq", "a")
			journaltest.MakeNewer(t, path, idem.DefaultScope, "a")

			s.fix()
			js, c = open()
			err = tc.remove(t, js, c, endpoint)
			require.ErrorIs(t, err, journal.ErrVersion, "the removal over an open record this release cannot read")
			require.ErrorContains(t, err, "newer idem")
			kept, err := js.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, err)
			require.Equal(t, []string{endpoint}, kept, "journal: endpoints")
			es, err := c.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, err)
			require.Equal(t, []string{endpoint}, es, "the rolled-back Client's endpoints")
			shut(js, c)

			// The newer idem again: it reads a.
			journaltest.SetRecordByte(t, path, idem.DefaultScope, "a", 2, written[2])
			js, c = open()
			defer shut(js, c)
			_, err = c.Resume(t.Context())
			require.NoError(t, err, "Resume()")
			s.requireSeen(t, []string{"a", "k2"}, 2)
			a, err := js.Get(t.Context(), idem.DefaultScope, "a")
			require.NoError(t, err)
			require.Equal(t, journal.StateUnknown, a.State, "journal: a's State")
			require.Equal(t, idem.ReviewKeyIgnored, a.Review, "journal: a's Review")
			require.Len(t, a.Attempts, 1, "journal: a's attempts")
		})
	}
}
