package admin_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// recordingStore notes each List's filter and how many records it
// returned: what a page cost the journal.
type recordingStore struct {
	*journal.Store
	filters []journal.Filter
	read    []int
}

func (s *recordingStore) List(ctx context.Context, f journal.Filter) ([]*journal.Record, error) {
	recs, err := s.Store.List(ctx, f)
	s.filters, s.read = append(s.filters, f), append(s.read, len(recs))
	return recs, err
}

// listFixture is a journal of n pending operations in scope "payments",
// order-00 on, and the handler.
func listFixture(t *testing.T, n int) (*recordingStore, *fixture) {
	var store *recordingStore
	f := listFixtureOver(t, n, func(s *recordingStore) idem.Store { store = s; return s })
	return store, f
}

// listFixtureOver is listFixture with the client's Store wrap(the
// recording one).
func listFixtureOver(t *testing.T, n int, wrap func(*recordingStore) idem.Store) *fixture {
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	for i := range n {
		_, err := js.Create(context.Background(), journaltest.NewRecord("payments", fmt.Sprintf("order-%02d", i), epoch))
		require.NoError(t, err)
	}
	client, err := idem.New(wrap(&recordingStore{Store: js}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	h := httptest.NewServer(admin.NewHandler(client))
	t.Cleanup(h.Close)
	return &fixture{t: t, admin: h}
}

// TestListLaterPageReadsOnlyItsPage: a page after the first read every
// operation of the journal up to its cursor and dropped them, at 100k
// operations ~135 MB and ~140 ms a page inside the service (idem -url list,
// a dashboard polling the handler). The journal now starts after the
// cursor and reads one page and one more, as for the first page.
func TestListLaterPageReadsOnlyItsPage(t *testing.T) {
	store, f := listFixture(t, 10)
	page := func(cursor string) (keys []string, next string) {
		t.Helper()
		q := url.Values{"limit": {"3"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p admin.Page
		require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/operations?"+q.Encode(), "", &p))
		for _, op := range p.Operations {
			keys = append(keys, op.Key)
		}
		return keys, p.Next
	}
	keys, next := page("")
	require.Equal(t, []string{"order-00", "order-01", "order-02"}, keys, "page 1")
	keys, next = page(next)
	require.Equal(t, []string{"order-03", "order-04", "order-05"}, keys, "page 2")
	keys, next = page(next)
	require.Equal(t, []string{"order-06", "order-07", "order-08"}, keys, "page 3")
	keys, next = page(next)
	require.Equal(t, []string{"order-09"}, keys, "page 4")
	require.Empty(t, next, "the last page's next")
	require.Equal(t, []journal.Position{{}, {Scope: "payments", Key: "order-02"}, {Scope: "payments", Key: "order-05"},
		{Scope: "payments", Key: "order-08"}}, afters(store.filters), "each page's List starts after the previous page")
	require.Equal(t, []int{4, 4, 4, 1}, store.read, "records each page's List read")
	for _, jf := range store.filters {
		require.Equal(t, 4, jf.Limit, "List's limit: the page and one more")
	}
}

// listAll follows next from the first page of limit operations, as idem
// -url list does, for at most pages pages, and returns the keys listed.
func (f *fixture) listAll(limit, pages int) []string {
	f.t.Helper()
	var keys []string
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	for n := 0; ; n++ {
		require.Less(f.t, n, pages, "pages of %d; listed so far %v", limit, keys)
		var p admin.Page
		require.Equal(f.t, http.StatusOK, f.do(http.MethodGet, "/operations?"+q.Encode(), "", &p))
		for _, op := range p.Operations {
			keys = append(keys, op.Key)
		}
		if p.Next == "" {
			return keys
		}
		require.NotEqual(f.t, q.Get("cursor"), p.Next, "next does not advance")
		q.Set("cursor", p.Next)
	}
}

func afters(fs []journal.Filter) []journal.Position {
	out := make([]journal.Position, len(fs))
	for i, f := range fs {
		out[i] = f.After
	}
	return out
}

// TestListCursorWithSecondNUL: a cursor no page returned, with a NUL byte
// in its key part (no key holds one), gets the cursor's own error, not the
// journal's refusal of such a bound.
func TestListCursorWithSecondNUL(t *testing.T) {
	store, f := listFixture(t, 1)
	cursor := base64.RawURLEncoding.EncodeToString([]byte("payments\x00order\x00x"))
	var e struct{ Error admin.Error }
	require.Equal(t, http.StatusBadRequest, f.do(http.MethodGet, "/operations?cursor="+cursor, "", &e))
	require.Equal(t, "bad_request", e.Error.Code)
	require.Contains(t, e.Error.Message, "pass the next value of a previous page unchanged")
	require.Empty(t, store.filters, "List calls")
}
