package idem

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem/journal"
)

// A first send is no resend: the wall clock's steps (wallSteps, read
// under a lock every Client call would share) are none of its business.
// The attempt journaled with the record made it look like one to
// resendBlock, which read them on every Submit: a shared lock and an
// 8-frame copy on the path every call takes (~500 instructions per
// operation under callgrind, a lock 64 callers contend for).
func TestFirstSendReadsNoWallSteps(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"state":"succeeded","resourceId":"ord_1"}`)
	}))
	defer srv.Close()
	s, err := journal.Open(filepath.Join(t.TempDir(), "j"), journal.WithUnsafeNoSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := New(s, WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, key := range []string{"a", "b"} {
		res, err := c.Submit(t.Context(), Request{Key: key, URL: srv.URL + "/v1/orders", Body: []byte(`{"amount":1}`)})
		if err != nil || res.State != StateSucceeded {
			t.Fatalf("Submit(%s) = %v, %v", key, res, err)
		}
	}
	c.steps.mu.Lock()
	defer c.steps.mu.Unlock()
	if c.steps.n != 0 {
		t.Errorf("two first sends read the wall clock's steps (%d frames)", c.steps.n)
	}
}
