package crashtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// Keys of the two payments of TestKeyIgnoringSaveKilled.
const (
	ignoringLost   = "pay-lost"   // in flight when the process dies
	ignoringLearnt = "pay-learnt" // its 201 says the endpoint ignores the key
)

// ignoringCharges is a Solidgate payment endpoint that does not
// de-duplicate by the key ("Idempotency support varies by endpoint. [...]
// A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests): every request
// charges, and is answered 201 marked Idempotency-Status: ignored, but for
// ignoringLost's first, whose answer never comes (the handler holds it
// until the client's connection goes).
type ignoringCharges struct {
	mu      sync.Mutex
	charges map[string]int
}

func (s *ignoringCharges) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet { // GET /charges?key=K: the test's own count
		s.mu.Lock()
		n := s.charges[r.URL.Query().Get("key")]
		s.mu.Unlock()
		_, _ = fmt.Fprint(w, n)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.charges[key]++
	n := s.charges[key]
	s.mu.Unlock()
	if key == ignoringLost && n == 1 {
		<-r.Context().Done() // charged; the answer is lost
		return
	}
	w.Header().Set("Idempotency-Status", "ignored")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":"pay_%s_%d","status":"settled"}`, key, n)
}

func (s *ignoringCharges) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.charges[key]
}

// A process learns from ignoringLearnt's 201 that the payment endpoint
// ignores the key while ignoringLost's payment there is in flight, and is
// SIGKILLed just after the 201's outcome is committed. The endpoint is
// journaled before that outcome: the next process reads it and flags
// ignoringLost for review. When the save ran beside the drive, the kill
// came before it committed: the next process read nothing, and Resume
// resent ignoringLost under the same key, a second charge the endpoint
// does not de-duplicate. Default settings: no result endpoint.
func TestKeyIgnoringSaveKilled(t *testing.T) {
	requireLostFlaggedAfterKill(t, "ignoring-save")
}

// requireLostFlaggedAfterKill runs the child of mode, which dies once
// ignoringLearnt's outcome is committed, then Resume in another, and
// checks that each payment was charged once and ignoringLost left open,
// flagged ReviewKeyIgnored.
func requireLostFlaggedAfterKill(t *testing.T, mode string) {
	t.Helper()
	srv := &ignoringCharges{charges: map[string]int{}}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	path := filepath.Join(t.TempDir(), "idem.journal")
	env := []string{envJournal + "=" + path, envURL + "=" + hs.URL}

	var lines []string
	ch := startChild(t, append(env, envMode+"="+mode)...)
	ch.wait(t, time.Minute, func(l string) { lines = append(lines, l) })
	require.Truef(t, ch.killed(), "child died of SIGKILL; exit %v; lines %q; stderr:\n%s", ch.err, lines, ch.stderr)
	require.Contains(t, lines, "crash settled "+ignoringLearnt, "the child crashed once its outcome was committed")
	require.Equal(t, 1, srv.count(ignoringLost), "charges for %s before the restart", ignoringLost)
	require.Equal(t, 1, srv.count(ignoringLearnt), "charges for %s before the restart", ignoringLearnt)
	recs := readJournal(t, path)
	require.Equal(t, journal.StateSucceeded, recs[ignoringLearnt].State, "%s committed before the crash", ignoringLearnt)
	require.True(t, recs[ignoringLost].Open(), "%s open after the crash", ignoringLost)

	ch = startChild(t, append(env, envMode+"=ignoring-resume")...)
	ch.wait(t, time.Minute, func(l string) { lines = append(lines, l) })
	ch.requireClean(t)
	require.Equal(t, 1, srv.count(ignoringLost), "charges for %s after the restart (lines %q)", ignoringLost, lines)
	require.Equal(t, 1, srv.count(ignoringLearnt), "charges for %s after the restart", ignoringLearnt)
	rec := readJournal(t, path)[ignoringLost]
	require.True(t, rec.Open(), "%s is left open for a person: state %s", ignoringLost, rec.State)
	require.Equal(t, idem.ReviewKeyIgnored, rec.Review, "%s's review", ignoringLost)
}

// saveKilledStore dies once ignoringLearnt's outcome is committed.
type saveKilledStore struct {
	*journal.Store
}

func (s *saveKilledStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	rec, err := s.Store.Update(ctx, scope, key, fn)
	if err == nil && key == ignoringLearnt && rec.State.Terminal() {
		die("settled", ignoringLearnt)
	}
	return rec, err
}

// ignoringSave is the child of TestKeyIgnoringSaveKilled that dies.
func (ch *childProc) ignoringSave() error {
	return ch.learntWhileLost(context.Background(), func(js *journal.Store) idem.Store {
		return &saveKilledStore{Store: js}
	})
}

// learntWhileLost opens the child's journal as the Store wrap makes of
// it, puts ignoringLost in flight on a Client over it (lostInFlight),
// then submits ignoringLearnt with ctx, and never returns but with an
// error: the Store kills the child (saveKilledStore).
func (ch *childProc) learntWhileLost(ctx context.Context, wrap func(*journal.Store) idem.Store) error {
	js, err := journal.Open(ch.journal)
	if err != nil {
		return err
	}
	c, err := idem.New(wrap(js))
	if err != nil {
		return err
	}
	charge := ch.url + "/api/v1/charge"
	if err := ch.lostInFlight(c, charge); err != nil {
		return err
	}
	_, err = c.Submit(ctx, idem.Request{Key: ignoringLearnt, URL: charge, Body: []byte(`{"amount":200}`)})
	say("submitted %s: %v", ignoringLearnt, err)
	select {} // dies at the commit
}

// lostInFlight submits ignoringLost to charge through c, in a goroutine
// of its own, and returns once the server has charged it: its answer
// never comes.
func (ch *childProc) lostInFlight(c *idem.Client, charge string) error {
	go func() {
		_, err := c.Submit(context.Background(), idem.Request{Key: ignoringLost, URL: charge, Body: []byte(`{"amount":100}`)})
		say("error Submit(%s) returned: %v", ignoringLost, err)
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(ch.url + "/charges?key=" + ignoringLost)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if strings.TrimSpace(string(b)) == "1" {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the server never saw " + ignoringLost)
		}
		time.Sleep(time.Millisecond) // polling the server with a deadline
	}
}

// ignoringResume is the next process of TestKeyIgnoringSaveKilled:
// Resume, with the default settings.
func (ch *childProc) ignoringResume() error {
	c, err := idem.Open(ch.journal)
	if err != nil {
		return err
	}
	defer c.Close()
	sum, err := c.Resume(context.Background())
	say("resumed visited=%d open=%d: %v", sum.Visited, sum.Processing+sum.Unknown+sum.Pending+sum.Review, err)
	return nil
}
