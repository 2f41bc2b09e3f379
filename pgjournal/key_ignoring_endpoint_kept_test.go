package pgjournal_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// A Solidgate payment endpoint that does not de-duplicate by the key
// ("Idempotency support varies by endpoint. [...] A value of ignored means
// the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) answered a
// first payment (k1) 500 marked ignored; an operator resolved it. A later
// process on the same schema knew nothing of the endpoint (no open
// operation flagged for it), and a new payment there (k2) whose answer
// was lost was resent with the same key: charged twice. The endpoint is
// kept in the schema's key_ignoring table (migration 0002): k2 is sent
// once and flagged for review.
func TestKeyIgnoringEndpointKeptAcrossOpens(t *testing.T) {
	ctx := context.Background()
	var (
		mu   sync.Mutex
		keys []string // the Idempotency-Key of each charge, in order
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 2 {
			// k2 charged, its answer lost.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"code":"5.01","message":"internal error"}}`)
	}))
	t.Cleanup(srv.Close)
	charge := srv.URL + "/api/v1/charge"
	requireCharges := func(want ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, want, keys, "charges, by the key each request carried")
	}

	schema := openStore(t).Schema()
	open := func() (*idem.Client, *pgjournal.Store) {
		s, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(schema))
		require.NoError(t, err)
		c, err := idem.New(s, idem.WithHTTPClient(srv.Client()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		return c, s
	}

	c, s := open()
	res, err := c.Submit(ctx, idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k1)")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	_, err = c.Resolve(ctx, "", "k1", idem.Resolution{State: idem.StateSucceeded, ResourceID: "pay_1", Reason: "one charge in the dashboard", By: "ops"})
	require.NoError(t, err, "Resolve(k1)")
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())

	c, s = open() // another process: no open operation says the endpoint ignores the key
	res, err = c.Submit(ctx, idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":100}`)})
	requireCharges("k1", "k2")
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k2): its lost answer may have charged, and a resend would charge again")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	op, err := c.Lookup(ctx, "", "k2")
	require.NoError(t, err)
	require.Equal(t, 1, op.Attempts, "journal: k2's attempts")
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k2's Review")

	got, err := s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + charge}, got, "the endpoint, kept: method and URL, no query")

	// Added again, nothing more; refused unsent when it cannot be a URL's.
	require.NoError(t, s.AddKeyIgnoring(ctx, "POST "+charge))
	for _, bad := range []string{"", "POST http://127.0.0.1/a\x00b"} {
		require.ErrorIs(t, s.AddKeyIgnoring(ctx, bad), journal.ErrInvalid, "AddKeyIgnoring(%q)", bad)
	}
	got, err = s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + charge}, got, "after adding it again")

	// An operator forgets it (the provider de-duplicates there now).
	removed, err := s.RemoveKeyIgnoring(ctx, "POST "+charge)
	require.NoError(t, err)
	require.True(t, removed, "RemoveKeyIgnoring()")
	removed, err = s.RemoveKeyIgnoring(ctx, "POST "+charge)
	require.NoError(t, err)
	require.False(t, removed, "RemoveKeyIgnoring() again")
	got, err = s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "after RemoveKeyIgnoring()")
}

// A rollback to a release of schema version 1, whose Migrate refuses
// version 2, takes version 2's row out of schema_version (README); the
// table stays, and the Migrate of the way back keeps what it holds.
func TestKeyIgnoringMigratedAgainAfterARollback(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	const e = "POST https://api.example.com/api/v1/charge"
	require.NoError(t, s.AddKeyIgnoring(ctx, e))
	conn, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DELETE FROM `+pgx.Identifier{s.Schema(), "schema_version"}.Sanitize()+` WHERE version = 2`)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx), "Migrate() on the way back")
	got, err := s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{e}, got)
}
