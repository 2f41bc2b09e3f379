package idem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// An empty scope is the client's default everywhere: in a Request, in
// Lookup and Resolve, and in a List filter.
func TestEmptyScopeIsTheDefault(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithScope("acct-7")))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)

	op, err := e.client.Lookup(e.ctx, "", "k")
	require.NoError(t, err, "Lookup with an empty scope")
	require.Equal(t, "acct-7", op.Scope)

	res, err := e.client.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateFailed, Reason: "refunded by hand", By: "ops"})
	require.NoError(t, err, "Resolve with an empty scope")
	require.Equal(t, "acct-7", res.Scope)

	ops, err := e.client.List(e.ctx, idem.Filter{})
	require.NoError(t, err)
	require.Len(t, ops, 1)
	require.Equal(t, "acct-7", ops[0].Scope)
}

// Filter has what the operator tool has: scope, open, flagged, older-than.
func TestListFilter(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxAttempts(1)))
	submit := func(scope, key string) {
		t.Helper()
		r := e.req(key, `{}`)
		r.Scope = scope
		_, _ = e.client.Submit(e.ctx, r)
	}
	submit("", "settled-old")
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "open-old"}))
	submit("", "open-old")
	e.clock.Advance(2 * time.Hour)
	submit("", "settled-new")
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "open-new"}))
	submit("", "open-new")
	submit("other", "elsewhere")
	_, err := e.client.Resolve(e.ctx, "", "open-old", idem.Resolution{State: idem.StateSucceeded, Reason: "seen in the dashboard", By: "ops"})
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "open-old-2"}))
	submit("", "open-old-2")

	keys := func(f idem.Filter) []string {
		t.Helper()
		ops, err := e.client.List(e.ctx, f)
		require.NoError(t, err)
		var out []string
		for _, op := range ops {
			out = append(out, op.Scope+"/"+op.Key)
		}
		return out
	}
	require.Equal(t, []string{"default/open-new", "default/open-old", "default/open-old-2", "default/settled-new", "default/settled-old"}, keys(idem.Filter{}))
	require.Equal(t, []string{"default/open-new", "default/open-old-2"}, keys(idem.Filter{Open: true}))
	require.Equal(t, []string{"other/elsewhere"}, keys(idem.Filter{Scope: "other"}))
	require.Len(t, keys(idem.Filter{AllScopes: true}), 6)
	require.Equal(t, []string{"default/open-old", "default/settled-old"}, keys(idem.Filter{OlderThan: time.Hour}))
	require.Equal(t, []string{"default/open-new"}, keys(idem.Filter{Open: true, Limit: 1}))
	// Paging: After is the last (scope, key) of the page before, whether
	// or not it still exists.
	require.Equal(t, []string{"default/open-old-2", "default/settled-new"}, keys(idem.Filter{After: journal.Position{Scope: "default", Key: "open-old"}, Limit: 2}))
	require.Equal(t, []string{"default/open-old-2"}, keys(idem.Filter{Open: true, After: journal.Position{Scope: "default", Key: "open-new"}}))
	require.Equal(t, []string{"default/settled-new", "default/settled-old"}, keys(idem.Filter{After: journal.Position{Scope: "default", Key: "pruned"}}))
	require.Equal(t, []string{"other/elsewhere"}, keys(idem.Filter{AllScopes: true, After: journal.Position{Scope: "default", Key: "settled-old"}}))

	_, err = e.client.List(e.ctx, idem.Filter{AllScopes: true, Scope: "other"})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	_, err = e.client.List(e.ctx, idem.Filter{OlderThan: -time.Second})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	// A misspelt state matched nothing: an empty list that reads as "no
	// unknown operations" while some wait for a person.
	_, err = e.client.List(e.ctx, idem.Filter{States: []idem.State{idem.StateUnknown, "Unknown"}})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, `"Unknown"`)
	// No operation's key holds a NUL byte, so no page ends at one: the
	// caller's cursor was made or mangled elsewhere, which is the
	// caller's error, not the journal's.
	_, err = e.client.List(e.ctx, idem.Filter{After: journal.Position{Scope: "default", Key: "open\x00old"}})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	require.ErrorContains(t, err, "Filter.After")
}
