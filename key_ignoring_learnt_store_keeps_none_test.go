package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// A Solidgate payment endpoint that does not de-duplicate by the key
// ("Idempotency support varies by endpoint. [...] A value of ignored means
// the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) charged k1,
// whose caller gave up before the answer came (k1 open, unflagged: nothing
// had said the endpoint ignores the key), then answered k2 201 marked
// ignored, which the process learnt from. The Store keeps no endpoints:
// one without idem.KeyIgnoringStore, or a pgjournal whose schema Migrate
// has not brought to version 2 (its AddKeyIgnoring then fails with
// idem.ErrKeyIgnoringUnkept, modelled). k2's outcome was committed
// unflagged, nothing in the journal told of the endpoint, and the next
// process (a plain restart: no kill needed) had Resume resend k1 under the
// same key, which the endpoint charged again. The endpoint's other open
// operations that may have executed are flagged before k2's outcome is
// committed, as when a keeping Store's save fails: k1 is left open for a
// person, charged once.
func TestKeyIgnoringLearntOnStoreKeepingNone(t *testing.T) {
	for _, tt := range storesKeepingNone {
		t.Run(tt.name, func(t *testing.T) {
			ctx, s, open := firstAnswerLost(t, tt.wrap, ignoredCreated)
			charge := s.srv.URL + "/api/v1/charge"

			c, js := open()
			submitK1Lost(ctx, t, c, charge)
			res, err := c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":200}`)})
			require.NoError(t, err, "Submit(k2)")
			require.Equal(t, idem.StateSucceeded, res.State)
			resumedK1LeftForAPerson(t, c, js, open, s)
		})
	}
}

// storesKeepingNone wraps a journal as the Stores that keep no endpoints
// ignoring the key: one without idem.KeyIgnoringStore, and a pgjournal
// not migrated (unmigratedStore).
var storesKeepingNone = []struct {
	name string
	wrap func(*journal.Store) idem.Store
}{
	{"keeps none", func(js *journal.Store) idem.Store { return storeOnly{js} }},
	{"not migrated", func(js *journal.Store) idem.Store { return unmigratedStore{js} }},
}

// unmigratedStore is a pgjournal whose schema Migrate has not brought to
// version 2, modelled: its operations work, its endpoints do not
// (pgjournal's unkept: the table is missing).
type unmigratedStore struct{ *journal.Store }

func (unmigratedStore) AddKeyIgnoring(context.Context, string) error {
	return idem.ErrKeyIgnoringUnkept
}

func (unmigratedStore) KeyIgnoringEndpoints(context.Context) ([]string, error) {
	return nil, idem.ErrKeyIgnoringUnkept
}

// firstAnswerLost is the endpoint of the tests above, which charges every
// request: the first's answer is lost, its caller (ctx) leaving before it
// came, and answer answers the others. open opens a Client on one journal
// file, its Store wrapped, again after a Close: a restart.
func firstAnswerLost(t *testing.T, wrap func(*journal.Store) idem.Store, answer func(n int, w http.ResponseWriter)) (
	ctx context.Context, s *keyIgnoringCharges, open func() (*idem.Client, *journal.Store),
) {
	ctx, giveUp := context.WithCancel(t.Context())
	t.Cleanup(giveUp)
	s = newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			giveUp() // k1 charged; its caller leaves before the answer
			dropConnection(w)
			return
		}
		answer(n, w)
	})
	path := filepath.Join(t.TempDir(), "idem.journal")
	return ctx, s, func() (*idem.Client, *journal.Store) {
		js, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(wrap(js), idem.WithHTTPClient(s.srv.Client()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = js.Close() })
		return c, js
	}
}

// submitK1Lost submits k1 to charge with c, under ctx, which
// firstAnswerLost's endpoint ends as it charges: k1 is left open, its
// answer lost.
func submitK1Lost(ctx context.Context, t *testing.T, c *idem.Client, charge string) {
	t.Helper()
	_, err := c.Submit(ctx, idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit(k1): its caller gave up")
}

// resumedK1LeftForAPerson restarts c (its Store js) with open, and holds
// that Resume left k1, charged once, open and flagged ReviewKeyIgnored,
// the endpoint having charged k1 and k2 once each. It returns the new
// Client.
func resumedK1LeftForAPerson(t *testing.T, c *idem.Client, js *journal.Store, open func() (*idem.Client, *journal.Store), s *keyIgnoringCharges) *idem.Client {
	t.Helper()
	require.NoError(t, c.Close())
	require.NoError(t, js.Close())
	c, _ = open() // a restart
	_, err := c.Resume(t.Context())
	require.NoError(t, err, "Resume()")
	require.Equal(t, []string{"k1", "k2"}, s.charged(), "charges, by the key each request carried")
	requireOpenKeyIgnored(t, c, "k1")
	return c
}

// requireOpenKeyIgnored holds that key's operation, sent once, is open
// for a person, flagged ReviewKeyIgnored.
func requireOpenKeyIgnored(t *testing.T, c *idem.Client, key string) {
	t.Helper()
	op, err := c.Lookup(t.Context(), "", key)
	require.NoError(t, err)
	require.False(t, op.State.Terminal(), "journal: %s open for a person, state %s", key, op.State)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: %s's Review", key)
	require.Equal(t, 1, op.Attempts, "journal: %s's attempts", key)
}
