package idem_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestErrorMessagesSayEachThingOnce prints the messages of the errors an
// application meets most (a locked journal, a key conflict on either side,
// a damaged file, a journal write that failed) and checks that none says
// the same thing twice, while errors.Is still finds every sentinel: a
// message that repeats its cause ("journal: journal: …") reads as two
// faults to the operator who has to act on it.
func TestErrorMessagesSayEachThingOnce(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		err  func(t *testing.T) error
		is   []error
	}{
		{"locked journal", func(t *testing.T) error {
			path := filepath.Join(t.TempDir(), "app.journal")
			held, err := journal.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = held.Close() })
			_, err = idem.Open(path, idem.WithJournalOptions(journal.WithLockTimeout(time.Millisecond)))
			return err
		}, []error{journal.ErrLocked}},
		{"not a journal", func(t *testing.T) error {
			path := filepath.Join(t.TempDir(), "app.journal")
			require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("not a journal\n", 600)), 0o600))
			_, err := idem.Open(path)
			return err
		}, []error{journal.ErrCorrupt}},
		{"key conflict, journal side", func(t *testing.T) error {
			e := newEnv(t)
			_, err := e.client.Prepare(ctx, e.req("k1", `{"amount":1}`))
			require.NoError(t, err)
			_, err = e.client.Prepare(ctx, e.req("k1", `{"amount":2}`))
			return err
		}, []error{idem.ErrKeyConflict}},
		{"key conflict, server side", func(t *testing.T) error {
			e := newEnv(t)
			_, err := e.client.Submit(ctx, e.req("k1", `{"amount":1}`))
			require.NoError(t, err)
			// Another journal (another process) sends the key with another body.
			other, err := journal.Open(filepath.Join(t.TempDir(), "other.journal"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = other.Close() })
			c, err := idem.New(other, e.baseOpts()...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			_, err = c.Submit(ctx, e.req("k1", `{"amount":2}`))
			return err
		}, []error{idem.ErrKeyConflict, idem.ErrFailed}},
		{"contradicted failure", func(t *testing.T) error {
			e := newEnv(t)
			op, err := e.client.Prepare(ctx, e.req("k1", `{"amount":1}`))
			require.NoError(t, err)
			_, err = e.client.Resolve(ctx, "", "k1", idem.Resolution{State: idem.StateFailed, Reason: "not in the dashboard", By: "ops"})
			require.NoError(t, err)
			_, err = e.client.Confirm(ctx, "", "k1", webhookEvent(idem.StateSucceeded, "ord_1", "evt_1"))
			require.ErrorIs(t, err, idem.ErrConfirmConflict)
			_, err = e.client.Do(ctx, op)
			return err
		}, []error{idem.ErrNeedsReview, idem.ErrUnknownOutcome}},
		{"failed update", func(t *testing.T) error {
			e := newEnv(t)
			op, err := e.client.Prepare(ctx, e.req("k1", `{"amount":1}`))
			require.NoError(t, err)
			// Do gets the operation, then cannot record its attempt.
			_, err = readOnlyClient(t, e).Do(ctx, op)
			return err
		}, []error{journal.ErrReadOnly}},
		{"failed resume", func(t *testing.T) error {
			e := newEnv(t)
			_, err := e.client.Prepare(ctx, e.req("k1", `{"amount":1}`))
			require.NoError(t, err)
			c := readOnlyClient(t, e)
			_, err = c.Resume(ctx)
			return err
		}, []error{journal.ErrReadOnly, idem.ErrUnknownOutcome}},
		{"failed create", func(t *testing.T) error {
			e := newEnv(t)
			require.NoError(t, e.store.Close())
			_, err := e.client.Prepare(ctx, e.req("k1", `{"amount":1}`))
			return err
		}, []error{journal.ErrClosed}},
		{"failed lookup", func(t *testing.T) error {
			e := newEnv(t)
			require.NoError(t, e.store.Close())
			_, err := e.client.Lookup(ctx, idem.DefaultScope, "k1")
			return err
		}, []error{journal.ErrClosed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			require.Error(t, err)
			msg := err.Error()
			t.Log(msg)
			for _, target := range tc.is {
				require.ErrorIs(t, err, target)
			}
			requireSaidOnce(t, msg, tc.is)
		})
	}
}

// requireSaidOnce fails if msg names a package, says a sentinel's text,
// or any phrase of four words or more, twice.
func requireSaidOnce(t *testing.T, msg string, sentinels []error) {
	t.Helper()
	// A path ("…/app.journal: …") is not the package's name.
	msg = regexp.MustCompile(`/[^\s:]+`).ReplaceAllString(msg, "PATH")
	for _, prefix := range []string{"idem: ", "journal: "} {
		require.LessOrEqual(t, strings.Count(msg, prefix), 1, "%q said more than once", prefix)
	}
	all := append([]error{idem.ErrKeyConflict, idem.ErrFailed, idem.ErrUnknownOutcome,
		journal.ErrLocked, journal.ErrCorrupt, journal.ErrClosed, journal.ErrVersion, journal.ErrReadOnly}, sentinels...)
	for _, s := range all {
		text := strings.TrimPrefix(strings.TrimPrefix(s.Error(), "idem: "), "journal: ")
		require.LessOrEqual(t, strings.Count(msg, text), 1, "%q said more than once", text)
	}
	words := regexp.MustCompile(`[a-z']+`).FindAllString(strings.ToLower(msg), -1)
	const n = 4
	seen := map[string]bool{}
	for i := 0; i+n <= len(words); i++ {
		phrase := strings.Join(words[i:i+n], " ")
		require.False(t, seen[phrase], "%q said more than once", phrase)
		seen[phrase] = true
	}
}

// readOnlyClient closes e's client and journal and returns a client of the
// journal opened read-only: it reads operations but cannot record anything.
func readOnlyClient(t *testing.T, e *env) *idem.Client {
	t.Helper()
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())
	ro, err := journal.Open(e.path, journal.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ro.Close() })
	c, err := idem.New(ro, e.baseOpts()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
