package idem

import (
	"path/filepath"
	"testing"

	"github.com/idemkit/idem/journal"
)

// newRecord runs once per Submit and Prepare, before anything is
// journaled: the record (with the default Content-Type's value list and
// the room for Submit's first attempt), its
// generated key, its header map and the copy of the body are all it may
// allocate, the URL being parsed once per client (urlcache). It made 7
// before the record and the value list shared one allocation.
func TestNewRecordAllocations(t *testing.T) {
	s, err := journal.Open(filepath.Join(t.TempDir(), "j"), journal.WithUnsafeNoSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := Request{URL: "http://127.0.0.1:8080/v1/orders", Body: []byte(`{"amount":1000,"currency":"EUR"}`)}
	if _, _, err := c.newRecord(req, false); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if _, _, err := c.newRecord(req, false); err != nil {
			t.Fatal(err)
		}
	})
	if n > 6 {
		t.Errorf("newRecord allocs = %v; want at most 6", n)
	}
}
