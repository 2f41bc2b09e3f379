package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// orderEchoTransport answers each request 201 with the order its body
// names ("ord_" and the body), in memory: each operation its own answer.
type orderEchoTransport struct{}

func (orderEchoTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	return createdAnswer(r, `{"state":"succeeded","resourceId":"ord_`+string(b)+`"}`), nil
}

// A settle's journal.Result lives in its submit's allocation
// (submitEnd.result), which the record the Store hands back points at,
// and the bbolt journal's record in its write context's (owned.Lease).
// What the caller, the Settle hook, the journal and a Store keeping the
// records it handed back hold of one operation must stay that
// operation's once others have run on the same Client: none of them may
// read another order's id or body as its own.
func TestSettledResultKeptAcrossOperations(t *testing.T) {
	open := func(t *testing.T) *journal.Store {
		js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = js.Close() })
		return js
	}
	stores := map[string]func(t *testing.T) (idem.Store, func() []*journal.Record){
		"bbolt": func(t *testing.T) (idem.Store, func() []*journal.Record) { return open(t), nil },
		"records kept": func(t *testing.T) (idem.Store, func() []*journal.Record) {
			s := &recordsKeptStore{Store: open(t)}
			return s, func() []*journal.Record {
				s.mu.Lock()
				defer s.mu.Unlock()
				return append([]*journal.Record(nil), s.updated...)
			}
		},
		"memory": func(*testing.T) (idem.Store, func() []*journal.Record) { return newMemStore(), nil },
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			store, kept := mk(t)
			var mu sync.Mutex
			settled := map[string]*idem.Result{}
			c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: orderEchoTransport{}}),
				idem.WithHooks(idem.Hooks{Settle: func(_ context.Context, res *idem.Result) {
					mu.Lock()
					defer mu.Unlock()
					settled[res.Key] = res
				}}))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			ctx := context.Background()
			submit := func(key string) *idem.Result {
				res, err := c.Submit(ctx, idem.Request{Key: key, URL: "http://127.0.0.1:8080/v1/orders", Body: []byte(key)})
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				return res
			}
			first := submit("A")
			var keptA []*journal.Record
			if kept != nil {
				keptA = kept()
				require.NotEmpty(t, keptA)
			}
			for _, k := range []string{"B", "C", "D"} {
				submit(k)
			}

			want := func(where string, id string, status int, body []byte) {
				t.Helper()
				require.Equal(t, "ord_A", id, where)
				require.Equal(t, http.StatusCreated, status, where)
				require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_A"}`, string(body), where)
			}
			want("the caller's Result", first.ResourceID, first.StatusCode, first.Body)
			mu.Lock()
			hook := settled["A"]
			mu.Unlock()
			require.NotNil(t, hook)
			want("the Settle hook's Result", hook.ResourceID, hook.StatusCode, hook.Body)
			again, err := c.Wait(ctx, idem.DefaultScope, "A")
			require.NoError(t, err)
			want("the journal's", again.ResourceID, again.StatusCode, again.Body)
			for i, r := range keptA {
				if r == nil || r.Result == nil {
					continue
				}
				want(fmt.Sprintf("record %d the Store handed back", i), r.Result.ResourceID, r.Result.StatusCode, r.Result.Body)
			}
			for _, k := range []string{"B", "C", "D"} {
				res, err := c.Wait(ctx, idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equal(t, "ord_"+k, res.ResourceID)
			}
		})
	}
}
