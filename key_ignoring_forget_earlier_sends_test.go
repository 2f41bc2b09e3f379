package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// fixedAfterIncident is a Solidgate payment endpoint that ignored the
// key for a while and de-duplicates by it since. Solidgate says so per
// endpoint ("Idempotency support varies by endpoint. [...] A value of
// ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests). Modelled:
// until fixed, every request charges and its answer says
// Idempotency-Status: ignored, the key kept nowhere; once fixed, a
// request under a key it has seen since gets that key's payment. The
// next request armed by loseNext charges and loses its answer, cancelling
// its caller's context as it does (the caller gives up waiting).
type fixedAfterIncident struct {
	srv *httptest.Server

	mu       sync.Mutex
	fixed    bool
	keys     []string          // the Idempotency-Key of each request, in order
	charges  int               // payments made
	payments map[string]string // since fixed: key -> the payment it charged
	lose     int               // the request number whose answer is lost (0: none)
	onLost   func()
}

func newFixedAfterIncident(t testing.TB) *fixedAfterIncident {
	s := &fixedAfterIncident{payments: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.keys = append(s.keys, key)
		pay, replay := s.payments[key]
		if !replay {
			s.charges++
			pay = fmt.Sprintf("pay_%d", s.charges)
			if s.fixed {
				s.payments[key] = pay
			}
		}
		fixed, lost, onLost := s.fixed, len(s.keys) == s.lose, s.onLost
		s.mu.Unlock()
		if lost {
			if onLost != nil {
				onLost()
			}
			dropConnection(w)
			return
		}
		answerPayment(w, pay, !fixed, replay)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// submitLost submits a payment whose answer is lost after it charged,
// its caller giving up waiting as it is lost: left unknown, not resent.
func (s *fixedAfterIncident) submitLost(t testing.TB, c *idem.Client, key, url, body string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.mu.Lock()
	s.lose, s.onLost = len(s.keys)+1, cancel
	s.mu.Unlock()
	_, err := c.Submit(ctx, idem.Request{Key: key, URL: url, Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit(%s)", key)
	s.mu.Lock()
	s.onLost = nil
	s.mu.Unlock()
}

func (s *fixedAfterIncident) fix() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fixed = true
}

func (s *fixedAfterIncident) requireSeen(t testing.TB, keys []string, charges int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, keys, s.keys, "requests, by the key each carried")
	require.Equal(t, charges, s.charges, "charges")
}

// Payment a's answer is lost while the endpoint ignores the key, its
// caller giving up; payment k2's answer then says the endpoint ignores
// the key. The provider fixes the endpoint and the operator forgets it
// (ForgetKeyIgnoring), as its doc says to. a was sent before the
// endpoint de-duplicated: the endpoint kept no key for it, and a resend
// under a is a second payment. Before the forget, Resume flagged a
// (resendBlock); after it, Resume resent a: requests a, k2, a; 3
// charges, a succeeded clean with pay_3 where pay_1 was charged too.
// Only a lost answer to a send made after the forget may be resent: the
// forget flags a ReviewKeyIgnored first, as the drive that visited it
// would have. Requests a, k2; 2 charges; a unknown, flagged, 1 attempt.
func TestForgetKeyIgnoringFlagsOperationsSentBefore(t *testing.T) {
	s := newFixedAfterIncident(t)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	charge := s.srv.URL + "/api/v1/charge"
	endpoint := "POST " + charge

	s.submitLost(t, c, "a", charge, `{"amount":100}`)
	_, err := c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err, "Submit(k2): its answer says the key is ignored")
	s.fix()
	known, err := c.ForgetKeyIgnoring(t.Context(), endpoint)
	require.NoError(t, err, "ForgetKeyIgnoring()")
	require.True(t, known, "ForgetKeyIgnoring(): known")

	a, err := c.Store().Get(t.Context(), idem.DefaultScope, "a")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, a.Review, "journal: a's Review after ForgetKeyIgnoring()")

	sum, err := c.Resume(t.Context())
	require.NoError(t, err, "Resume()")
	require.Equal(t, 1, sum.Review, "Resume(): a flagged")
	s.requireSeen(t, []string{"a", "k2"}, 2)
	a, err = c.Store().Get(t.Context(), idem.DefaultScope, "a")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, a.State, "journal: a's State")
	require.Equal(t, idem.ReviewKeyIgnored, a.Review, "journal: a's Review")
	require.Len(t, a.Attempts, 1, "journal: a's attempts")
}

// The forget races a Resume visiting the payments whose answers were lost
// before it, and new payments sent meanwhile: whichever comes first, the
// Resume's visit (the endpoint still known: flagged) or the forget's flag,
// none of a1..a8 is resent (one request each), and each ends flagged
// ReviewKeyIgnored; the new payments, answered, go once each.
func TestForgetKeyIgnoringRacesResume(t *testing.T) {
	s := newFixedAfterIncident(t)
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	charge := s.srv.URL + "/api/v1/charge"
	endpoint := "POST " + charge

	var want []string
	for i := 1; i <= 8; i++ {
		key := fmt.Sprintf("a%d", i)
		s.submitLost(t, c, key, charge, `{"amount":100}`)
		want = append(want, key)
	}
	_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: charge, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err, "Submit(k): its answer says the key is ignored")
	want = append(want, "k")
	s.fix()

	// A deadlock fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Go(func() {
		_, err := c.ForgetKeyIgnoring(ctx, endpoint)
		errs <- err
	})
	wg.Go(func() {
		_, err := c.Resume(ctx)
		errs <- err
	})
	for i := 1; i <= 3; i++ {
		wg.Go(func() {
			_, err := c.Submit(ctx, idem.Request{Key: fmt.Sprintf("n%d", i), URL: charge, Body: []byte(`{"amount":7}`)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	s.mu.Lock()
	perKey := map[string]int{}
	for _, k := range s.keys {
		perKey[k]++
	}
	s.mu.Unlock()
	for _, k := range append(want, "n1", "n2", "n3") {
		require.Equal(t, 1, perKey[k], "requests under %s", k)
	}
	require.Len(t, perKey, len(want)+3, "keys seen")
	for _, k := range want[:len(want)-1] {
		rec, err := c.Store().Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equal(t, journal.StateUnknown, rec.State, "journal: %s's State", k)
		require.Equal(t, idem.ReviewKeyIgnored, rec.Review, "journal: %s's Review", k)
	}
}

// keepsNoRemover keeps the endpoints ignoring the key in a journal but
// cannot remove them (a KeyIgnoringStore that is no KeyIgnoringRemover):
// a custom Store written before RemoveKeyIgnoring was (modelled).
type keepsNoRemover struct {
	idem.Store
	js *journal.Store
}

func (s keepsNoRemover) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	return s.js.AddKeyIgnoring(ctx, endpoint)
}

func (s keepsNoRemover) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	return s.js.KeyIgnoringEndpoints(ctx)
}

// idem.RemoveKeyIgnoring, a tool's removal on the journal alone (idem
// key-ignoring remove), after the payments of
// TestForgetKeyIgnoringFlagsOperationsSentBefore (a's answer lost while
// the endpoint ignored the key, k2's saying so) and the process's end:
// it flags a, the one open operation a send of which may have executed
// there, and says so (flagged 1), then removes the endpoint; done again,
// it finds neither. A Store that keeps the endpoints but cannot remove
// them is refused (errors.ErrUnsupported) with nothing flagged: a flag
// with the endpoint kept would be a review asked for nothing. One that
// keeps none knows the endpoint only from an open operation flagged for
// it, and none is: nothing is flagged, as for any endpoint not known to
// ignore the key (it may de-duplicate, TestForgetUnknownKeyIgnoringEndpointFlagsNothing).
// Either way the server saw a and k2 once each.
func TestRemoveKeyIgnoringCountsWhatItFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		store   func(*journal.Store) idem.Store
		removed bool
		flagged int
		err     error
		kept    bool // the journal still keeps the endpoint
	}{
		{"journal", func(js *journal.Store) idem.Store { return js }, true, 1, nil, false},
		{"keeps them, no remover", func(js *journal.Store) idem.Store { return keepsNoRemover{js, js} }, false, 0, errors.ErrUnsupported, true},
		{"keeps none", func(js *journal.Store) idem.Store { return storeOnly{js} }, false, 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFixedAfterIncident(t)
			js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = js.Close() })
			c, err := idem.New(js, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
			require.NoError(t, err)
			charge := s.srv.URL + "/api/v1/charge"
			endpoint := "POST " + charge
			s.submitLost(t, c, "a", charge, `{"amount":100}`)
			_, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":5}`)})
			require.NoError(t, err, "Submit(k2): its answer says the key is ignored")
			require.NoError(t, c.Close()) // waits for the endpoint's journaling

			removed, flagged, err := idem.RemoveKeyIgnoring(t.Context(), tc.store(js), endpoint)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err, "RemoveKeyIgnoring()")
			} else {
				require.NoError(t, err, "RemoveKeyIgnoring()")
			}
			require.Equal(t, tc.removed, removed, "RemoveKeyIgnoring(): removed")
			require.Equal(t, tc.flagged, flagged, "RemoveKeyIgnoring(): flagged")
			a, err := js.Get(t.Context(), idem.DefaultScope, "a")
			require.NoError(t, err)
			require.Equal(t, journal.StateUnknown, a.State, "journal: a's State")
			require.Len(t, a.Attempts, 1, "journal: a's attempts")
			if tc.flagged == 1 {
				require.Equal(t, idem.ReviewKeyIgnored, a.Review, "journal: a's Review")
			} else {
				require.Empty(t, a.Review, "journal: a's Review")
			}
			kept, err := js.KeyIgnoringEndpoints(t.Context())
			require.NoError(t, err)
			if tc.kept {
				require.Equal(t, []string{endpoint}, kept, "journal: endpoints")
			} else {
				require.Empty(t, kept, "journal: endpoints")
			}
			s.requireSeen(t, []string{"a", "k2"}, 2)

			if tc.err == nil {
				removed, flagged, err = idem.RemoveKeyIgnoring(t.Context(), tc.store(js), endpoint)
				require.NoError(t, err, "RemoveKeyIgnoring() again")
				require.False(t, removed, "RemoveKeyIgnoring() again: removed")
				require.Zero(t, flagged, "RemoveKeyIgnoring() again: a already flagged")
			}
		})
	}
}
