package idem_test

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// The journal's file damaged under a running client: both of bbolt's meta
// pages fail their checksum (a disk fault, a stray write), and bbolt's
// Begin panics holding its locks. The journal's first call failed, its
// next ones waited for those locks for ever: a payment process that hangs
// holds its callers for ever and never reaches Resume. Submit must fail
// before sending anything (an operation not journaled may not be sent),
// and a drive under way must stop without sending again.

// damageMetaPages flips a bit of the checksum of both bbolt meta pages of
// the journal file at path (the last byte of each page's 64-byte meta,
// after its 16-byte page header; bbolt's page size is the system's), as a
// bad sector or a stray write through another descriptor would. The Store
// maps the file shared, so it sees the damage at once.
func damageMetaPages(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	for page := range int64(2) {
		off := page*int64(os.Getpagesize()) + 16 + 64 - 1
		b := make([]byte, 1)
		_, err = f.ReadAt(b, off)
		require.NoError(t, err)
		b[0] ^= 0x01
		_, err = f.WriteAt(b, off)
		require.NoError(t, err)
	}
}

// inTime runs call and fails the test if it has not returned in a
// minute (far more than a loaded machine takes), so that a call waiting
// for bbolt's locks fails the test rather than hanging the run. It ends
// the test binary then, with every goroutine's stack: the env's cleanup
// closes the journal, and would wait for the same locks (a panic or
// t.Fatal runs the cleanups first).
func inTime(t *testing.T, what string, call func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		buf := make([]byte, 1<<20)
		fmt.Fprintf(os.Stderr, "--- FAIL: %s: %s did not return in a minute: it waits for locks a bbolt panic left held\n%s\n",
			t.Name(), what, buf[:runtime.Stack(buf, true)])
		os.Exit(1)
	}
}

func TestSubmitOnJournalDamagedUnderTheClientSendsNothing(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Submit(e.ctx, e.req("k1", `{"amount":42}`))
	require.NoError(t, err)
	damageMetaPages(t, e.path)

	for _, key := range []string{"k2", "k3"} { // the second call hung
		inTime(t, "Submit "+key, func() {
			_, err := e.client.Submit(e.ctx, e.req(key, `{"amount":42}`))
			assert.ErrorIs(t, err, journal.ErrCorrupt, "Submit %s", key)
			assert.NotErrorIs(t, err, idem.ErrUnknownOutcome, "nothing was journaled")
		})
		require.Empty(t, e.submits(key), "requests sent for an operation not journaled")
	}
	inTime(t, "Close", func() {
		assert.NoError(t, e.client.Close())
		assert.ErrorIs(t, e.store.Close(), journal.ErrCorrupt)
	})
	require.Len(t, e.srv.Requests(), 1, "only k1's submit")
}

func TestDriveStopsWhenJournalDamagedUnderIt(t *testing.T) {
	var once sync.Once
	var path string
	var store func() *journal.Store
	// A gateway's 502 after the server took the order: the outcome is
	// unknown, and the drive must journal the attempt before it does
	// anything more. As the attempt goes out, the operation is copied
	// from the journal's log into its file (as the Store does in the
	// background), so that the drive's next write reads the file, and
	// the file is damaged.
	e := newEnv(t, script(step{forward: true, status: http.StatusBadGateway}),
		clientOpts(idem.WithRequestHook(func(r *http.Request) error {
			if r.Method == http.MethodPost {
				once.Do(func() {
					assert.NoError(t, store().Checkpoint(r.Context()))
					damageMetaPages(t, path)
				})
			}
			r.Header.Set("Authorization", "Bearer sk_test_PLANTED_SECRET")
			return nil
		})))
	path, store = e.path, func() *journal.Store { return e.store }
	inTime(t, "Submit", func() {
		_, err := e.client.Submit(e.ctx, e.req("k1", `{"amount":42}`))
		assert.ErrorIs(t, err, journal.ErrCorrupt)
	})
	require.Len(t, e.submits("k1"), 1, "submits after the journal failed")
	inTime(t, "Close", func() {
		_ = e.client.Close()
		assert.ErrorIs(t, e.store.Close(), journal.ErrCorrupt)
	})
}
