package admin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// BenchmarkListLaterPage measures a page of GET /operations half-way
// through a journal of 20k operations: what an operator paging through a
// big journal, or a dashboard polling it, costs the service that mounts
// the handler. It should cost about what the page holds, not what comes
// before it.
func BenchmarkListLaterPage(b *testing.B) {
	const total, half = 20000, 10000
	// Fsync off: the benchmark reads; writing the journal is only its setup.
	store, err := journal.Open(filepath.Join(b.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	for i := range total {
		if _, err := store.Create(ctx, journaltest.NewRecord("payments", fmt.Sprintf("order-%05d", i), epoch)); err != nil {
			b.Fatal(err)
		}
	}
	client, err := idem.New(store)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	h := admin.NewHandler(client)
	// The cursor a previous page of the handler's would have returned.
	cursor := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "payments\x00order-%05d", half-1))
	req := httptest.NewRequest(http.MethodGet, "/operations?limit=100&cursor="+cursor, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var p admin.Page
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || len(p.Operations) != 100 || p.Operations[0].Key != fmt.Sprintf("order-%05d", half) || p.Next == "" {
		b.Fatalf("the page after order-%05d: %v, %s", half-1, err, w.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
