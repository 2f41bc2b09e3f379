package pgjournal_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgjournal"
)

// lockedBuffer is a log's output, written by the Client's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A build of schema version 2 deployed before Migrate ran on a schema at
// version 1 (Open and New do not migrate; README: "Run it at start-up"):
// its records work, its key_ignoring table does not exist. Reading the
// endpoints kept there failed, and so every resend failed with it: a
// Stripe-like charge endpoint ("Stripe's idempotency works by saving the
// resulting status code and body of the first request made for any given
// idempotency key [...] Subsequent requests with the same key return the
// same result", https://docs.stripe.com/idempotency) whose first answer
// to k2 was lost got no resend, and k2 stayed unknown. A missing table
// is read as no endpoint kept, and saving to it (k1's endpoint, which
// ignores the key, on another host) is a no-op; logged once, saying to
// run Migrate. The flagged k1 still teaches the endpoint.
func TestKeyIgnoringTableNotMigratedYet(t *testing.T) {
	ctx := context.Background()
	var (
		mu      sync.Mutex
		charges = map[string]int{}    // per key, the charges made
		stored  = map[string]string{} // the charge endpoint's saved answer, per key
		lost    = true                // k2's first answer
	)
	// Two hosts: k2's first send takes a connection of its own, which
	// net/http does not resend on by itself when it drops.
	ignoring := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		charges[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"code":"5.01","message":"internal error"}}`)
	}))
	t.Cleanup(ignoring.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		defer mu.Unlock()
		body, ok := stored[key]
		if !ok {
			charges[key]++
			body = fmt.Sprintf(`{"id":"ch_%s","status":"succeeded"}`, key)
			stored[key] = body
		}
		if lost {
			lost = false
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)

	s := openStore(t)
	conn, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP TABLE `+pgx.Identifier{s.Schema(), "key_ignoring"}.Sanitize()+`;
		DELETE FROM `+pgx.Identifier{s.Schema(), "schema_version"}.Sanitize()+` WHERE version = 2`)
	require.NoError(t, err, "the schema back at version 1")

	var logs lockedBuffer
	c, err := idem.New(s, idem.WithHTTPClient(&http.Client{Transport: &http.Transport{}}),
		idem.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	res, err := c.Submit(ctx, idem.Request{Key: "k1", URL: ignoring.URL + "/api/v1/charge", Body: []byte(`{"amount":1}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k1)")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)

	res, err = c.Submit(ctx, idem.Request{Key: "k2", URL: srv.URL + "/v1/charges", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err, "Submit(k2): its lost answer resent under its key, which the endpoint answers from what it saved")
	require.Equal(t, idem.StateSucceeded, res.State)
	op, err := c.Lookup(ctx, "", "k2")
	require.NoError(t, err)
	require.Equal(t, 2, op.Attempts, "journal: k2's attempts")
	mu.Lock()
	require.Equal(t, map[string]int{"k1": 1, "k2": 1}, charges, "charges per key")
	mu.Unlock()

	require.NoError(t, c.Close())
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "run the journal's Migrate"), "logged once, saying to migrate: %s", out)
	require.NotContains(t, out, "could not journal", "the missing table is not a failed save: %s", out)
}

// On a schema still at version 1, reading the endpoints matches
// idem.ErrKeyIgnoringUnkept (none kept) but removing one failed with
// ErrNotMigrated alone: Client.ForgetKeyIgnoring, and so the admin
// handler's POST /key-ignoring/remove, failed where its doc says a Store
// with no place for them keeps none, and idem key-ignoring remove -dsn
// said the schema held no idem journal at all. Removing matches both now,
// and ForgetKeyIgnoring of an endpoint neither kept nor learnt reports it
// unknown, not an error. Modelled: a service built for
// schema version 2 before its Migrate ran (README: "Run it at start-up").
func TestKeyIgnoringRemoveNotMigratedYet(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	conn, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP TABLE `+pgx.Identifier{s.Schema(), "key_ignoring"}.Sanitize()+`;
		DELETE FROM `+pgx.Identifier{s.Schema(), "schema_version"}.Sanitize()+` WHERE version = 2`)
	require.NoError(t, err, "the schema back at version 1")

	_, err = s.RemoveKeyIgnoring(ctx, "POST https://api.example.com/v1/charge")
	require.ErrorIs(t, err, idem.ErrKeyIgnoringUnkept, "RemoveKeyIgnoring()")
	require.ErrorIs(t, err, pgjournal.ErrNotMigrated, "RemoveKeyIgnoring()")

	c, err := idem.New(s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	known, err := c.ForgetKeyIgnoring(ctx, "POST https://api.example.com/v1/charge")
	require.NoError(t, err, "ForgetKeyIgnoring()")
	require.False(t, known, "ForgetKeyIgnoring(): none kept, none learnt")
}
