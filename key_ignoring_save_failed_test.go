package idem_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// A Solidgate payment endpoint ignores the key ("Idempotency support
// varies by endpoint. [...] A value of ignored means the endpoint does
// not", https://api-docs.solidgate.com/api/v2/idempotent-requests) and
// charges every request. The journal holds l, a payment sent there once
// whose answer was lost (open, unknown, unflagged). Payment p's 201,
// marked ignored, teaches the endpoint; journaling it fails once (the
// disk full for a moment, ENOSPC; it recovers), and p settled succeeded,
// unflagged, with the endpoint known only in memory and never journaled
// again: the next process knew nothing of it and Resume resent l under
// the same key, a second charge. The save is now made again before p's
// outcome is committed: the endpoint is on disk when Submit(p) returns
// (a kill then loses nothing), and the next process sends l nothing and
// flags it for review. If that save fails too, Close makes it once more.
func TestKeyIgnoringEndpointWhoseSaveFailedIsJournaledBeforeItsPaymentSettles(t *testing.T) {
	for _, tt := range []struct {
		name string
		fail int32 // saves that fail
		// keptBySubmit: journaled when Submit(p) returns, else by Close
		keptBySubmit bool
	}{
		{"saved again by Submit", 1, true},
		{"saved again by Close", 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) { testKeyIgnoringSaveFailed(t, tt.fail, tt.keptBySubmit) })
	}
}

func testKeyIgnoringSaveFailed(t *testing.T, fail int32, keptBySubmit bool) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	charge := s.srv.URL + "/api/v1/charge"
	path := filepath.Join(t.TempDir(), "idem.journal")
	js, err := journal.Open(path)
	require.NoError(t, err)
	journalSentOnce(t, js, "l", "", charge, "")
	c, err := idem.New(&failingKeyIgnoringSave{Store: js, fail: fail}, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)

	res, err := c.Submit(t.Context(), idem.Request{Key: "p", URL: charge, Body: []byte(`{"amount":1}`)})
	require.NoError(t, err, "Submit(p)")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Empty(t, res.Review, "p: settled unflagged, so telling the next process nothing itself")
	// Before Close: a process killed now leaves the journal as it is.
	kept, err := js.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	if keptBySubmit {
		require.Equal(t, []string{"POST " + charge}, kept, "journal: endpoints ignoring the key when Submit(p) returned")
	} else {
		require.Empty(t, kept, "journal: endpoints ignoring the key when Submit(p) returned, its two saves failed")
	}
	require.NoError(t, c.Close())
	kept, err = js.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + charge}, kept, "journal: endpoints ignoring the key once Close returned")
	require.NoError(t, js.Close())

	c2, err := idem.Open(path, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	_, err = c2.Resume(t.Context())
	require.NoError(t, err, "Resume()")
	require.Equal(t, []string{"p"}, s.charged(), "charges, by key: l, charged once already by the process before, charged again")
	l, err := c2.Lookup(t.Context(), "", "l")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, l.State, "journal: l's State")
	require.Equal(t, idem.ReviewKeyIgnored, l.Review, "journal: l flagged for the endpoint")
	require.Equal(t, 1, l.Attempts, "journal: l's attempts")
}

// heldKeyIgnoringSave fails the first save of an endpoint (ENOSPC) and
// holds the second, made again by the submit it taught, until release is
// closed (entered says it is in flight); removed says a removal is made.
type heldKeyIgnoringSave struct {
	*journal.Store
	saves            atomic.Int32
	entered, release chan struct{}
	removed          chan struct{}
}

func (s *heldKeyIgnoringSave) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	switch s.saves.Add(1) {
	case 1:
		return fmt.Errorf("journal: add endpoint ignoring the key: %w", errNoSpace)
	case 2:
		close(s.entered)
		<-s.release
	}
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

func (s *heldKeyIgnoringSave) RemoveKeyIgnoring(ctx context.Context, endpoint string) (bool, error) {
	ok, err := s.Store.RemoveKeyIgnoring(ctx, endpoint)
	close(s.removed)
	return ok, err
}

// An operator forgets the endpoint (ForgetKeyIgnoring) while the save
// made again for it is in flight: removed first, the endpoint was put
// back in the journal by that save a moment later, the forget undone at
// the next start-up. The forget now waits for it (here past its own
// deadline: nothing removed, try again), and the second removes it for
// good.
func TestKeyIgnoringForgetNotUndoneBySaveMadeAgain(t *testing.T) {
	s := newKeyIgnoringCharges(t, ignoredCreated)
	charge := s.srv.URL + "/api/v1/charge"
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	st := &heldKeyIgnoringSave{Store: js, entered: make(chan struct{}), release: make(chan struct{}), removed: make(chan struct{})}
	c, err := idem.New(st, idem.WithHTTPClient(s.srv.Client()))
	require.NoError(t, err)

	submitted := make(chan error, 1)
	go func() {
		_, err := c.Submit(t.Context(), idem.Request{Key: "p", URL: charge, Body: []byte(`{"amount":1}`)})
		submitted <- err
	}()
	select {
	case <-st.entered:
	case err := <-submitted:
		t.Fatalf("Submit(p) returned (%v) before saving the endpoint again", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint's save was not made again")
	}
	forgot := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := c.ForgetKeyIgnoring(ctx, "POST "+charge)
		forgot <- err
	}()
	var err1 error
	select {
	case <-st.removed: // removed under the save in flight
		err1 = <-forgot
	case err1 = <-forgot:
	}
	close(st.release)
	require.NoError(t, <-submitted, "Submit(p)")
	if err1 != nil {
		_, err = c.ForgetKeyIgnoring(t.Context(), "POST "+charge)
		require.NoError(t, err, "ForgetKeyIgnoring, again")
	}
	require.NoError(t, c.Close())
	kept, err := js.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Empty(t, kept, "journal: endpoints ignoring the key after the operator forgot it")
	require.Equal(t, int32(2), st.saves.Load(), "saves of the endpoint: the first failed, made again once")
}
