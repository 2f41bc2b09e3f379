package idem_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// failingKeyIgnoringSave is a journal whose first AddKeyIgnoring fail
// (two, unless fail says how many), as commits on a full disk do
// (modelled: the journal's other writes, smaller or made once room was
// freed, go on).
type failingKeyIgnoringSave struct {
	*journal.Store
	fail     int32        // how many of the first saves fail; 0: two
	failures atomic.Int32 // how many saves were tried so far
}

func (s *failingKeyIgnoringSave) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	fail := s.fail
	if fail == 0 {
		fail = 2
	}
	if s.failures.Add(1) <= fail {
		return fmt.Errorf("journal: add endpoint ignoring the key: %w", errNoSpace)
	}
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

// journalFlaggedAndLost opens a journal at path holding two payments
// sent once to charge: x, flagged ReviewKeyIgnored by the process before
// (its endpoint never journaled: the flag is the one thing on disk that
// says the endpoint ignores the key), and l, unknown after its answer
// there was lost. Each has status endpoint orders+"/"+key unless orders
// is empty.
func journalFlaggedAndLost(t *testing.T, path, charge, orders string) *journal.Store {
	t.Helper()
	js, err := journal.Open(path)
	require.NoError(t, err)
	for key, review := range map[string]string{"x": idem.ReviewKeyIgnored, "l": ""} {
		journalSentOnce(t, js, key, review, charge, orders)
	}
	return js
}

// journalSentOnce journals in js a payment under key sent once to
// charge, unknown after its answer there was lost, flagged review; its
// status endpoint orders+"/"+key unless orders is empty.
func journalSentOnce(t *testing.T, js *journal.Store, key, review, charge, orders string) {
	t.Helper()
	journalSent(t, js, key, review, charge, orders, 1)
}

// journalSent is journalSentOnce of a payment sent sends times, each
// answer lost.
func journalSent(t *testing.T, js *journal.Store, key, review, charge, orders string, sends int) {
	t.Helper()
	var sent []journal.Attempt
	for i := range sends {
		sent = append(sent, journal.Attempt{Number: i + 1, Kind: journal.AttemptSubmit, Start: time.Now(), Wrote: true, Done: true})
	}
	body := []byte(`{"amount":100}`)
	rec := &journal.Record{Scope: idem.DefaultScope, Key: key, Method: http.MethodPost, URL: charge,
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StatePending, Created: time.Now()}
	if orders != "" {
		rec.QueryURL = orders + "/" + key
	}
	_, err := js.Create(t.Context(), rec)
	require.NoError(t, err)
	_, err = js.Update(t.Context(), idem.DefaultScope, key, func(r *journal.Record) error {
		r.State, r.Review, r.Attempts, r.FirstSent = journal.StateUnknown, review, sent, sent[0].Start
		return nil
	})
	require.NoError(t, err)
}

// resumeWithoutResendingL starts the next process on the journal at path
// (journalFlaggedAndLost's) and runs its Resume, which must know the
// endpoint, charge l no second time, and flag it. It returns that
// process's Client.
func resumeWithoutResendingL(t *testing.T, s *keyIgnoringCharges, path string) *idem.Client {
	t.Helper()
	c2, err := idem.Open(path, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	_, err = c2.Resume(t.Context())
	require.NoError(t, err)
	require.Empty(t, s.charged(), "charges, by key: l's payment, charged once already, charged again")
	op, err := c2.Lookup(t.Context(), "", "l")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: l flagged for the endpoint")
	return c2
}

// confirmXSucceeded confirms x succeeded, as a handler of x's "Updated
// Card Order" webhook does.
func confirmXSucceeded(c *idem.Client) error {
	_, err := c.Confirm(context.Background(), "", "x", cardOrderUpdated(idem.StateSucceeded, "pay_x", "evt_1"))
	return err
}

// settleFlaggedWhileSavesFail runs, on a journal of
// journalFlaggedAndLost's whose first two AddKeyIgnoring fail
// (failingKeyIgnoringSave), settle until it returns no error (as a
// provider redelivers an event, or a caller retries; at most 3 times),
// and returns its errors. Then it starts the next process on the
// journal and runs its Resume: it must know the endpoint from the
// journal, charge l no second time, and flag it. It returns that
// process's Client.
func settleFlaggedWhileSavesFail(t *testing.T, s *keyIgnoringCharges, orders string, settle func(*idem.Client) error) ([]error, *idem.Client) {
	t.Helper()
	charge := s.srv.URL + "/api/v1/charge"
	path := filepath.Join(t.TempDir(), "idem.journal")
	js := journalFlaggedAndLost(t, path, charge, orders)
	c, err := idem.New(&failingKeyIgnoringSave{Store: js}, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	var errs []error
	for range 3 {
		err := settle(c)
		errs = append(errs, err)
		if err == nil {
			break
		}
	}
	return errs, closeAndResumeKnowingTheEndpoint(t, s, c, js, path)
}

// closeAndResumeKnowingTheEndpoint closes c and its journal js (at path,
// journalFlaggedAndLost's), starts the next process on it and runs its
// Resume (resumeWithoutResendingL), which must find s's charge endpoint
// journaled as ignoring the key. It returns that process's Client.
func closeAndResumeKnowingTheEndpoint(t *testing.T, s *keyIgnoringCharges, c *idem.Client, js *journal.Store, path string) *idem.Client {
	t.Helper()
	require.NoError(t, c.Close())
	require.NoError(t, js.Close())
	c2 := resumeWithoutResendingL(t, s, path)
	kept, err := c2.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + s.srv.URL + "/api/v1/charge"}, kept, "endpoints journaled as ignoring the key")
	return c2
}

// A Solidgate payment endpoint ignores the key ("A value of ignored means
// the endpoint does not", https://api-docs.solidgate.com/api/v2/idempotent-requests).
// The journal holds x, flagged ReviewKeyIgnored by the process before,
// and l, whose answer there was lost: the flag is the one thing on disk
// that says the endpoint ignores the key. x's "Updated Card Order" webhook
// comes first; Confirm journals the endpoint before it clears the flag,
// but that save failed (the disk full for a while) rather than hung, and
// Confirm settled x all the same: the next process resent l under the
// same key, a second charge. Confirm now journals the endpoint itself
// after that save ended; failing too, it fails the Confirm, nothing
// written (the provider delivers the event again), and the redelivery
// journals the endpoint before it settles x.
func TestConfirmOfAKeyIgnoredFlagWhoseSaveFailedWritesNothing(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	// The provider delivers the event until the handler answers 2xx
	// (Confirm returns no error).
	errs, c2 := settleFlaggedWhileSavesFail(t, s, "", confirmXSucceeded)
	require.Len(t, errs, 2, "deliveries of x's event: the first refused, its saves failed")
	require.ErrorIs(t, errs[0], syscall.ENOSPC)
	require.NotErrorIs(t, errs[0], idem.ErrNotFound)
	x, err := c2.Lookup(t.Context(), "", "x")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, x.State, "x settled by the redelivery")
}
