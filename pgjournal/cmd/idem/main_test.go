package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
	"github.com/idemkit/idem/pgjournal/internal/pgtest"
)

// The tests drive the command through run, as a shell would, on a
// PostgreSQL journal and on a bbolt journal file holding the same records.

const (
	secretToken = clitest.SecretToken
	orderBody   = clitest.OrderBody
)

// pgDSN is the test server's DSN (pgtest.DSN).
func pgDSN(t testing.TB) string { return pgtest.DSN(t) }

var schemas atomic.Int64

// pgJournal is a migrated schema of its own on the test server, dropped
// when the test ends, and a Store on it, as a replica would hold.
type pgJournal struct {
	dsn    string
	schema string
	store  *pgjournal.Store
}

func newPG(t testing.TB) pgJournal {
	t.Helper()
	ctx := context.Background()
	dsn := pgDSN(t)
	schema := fmt.Sprintf("cli%d_%d", os.Getpid(), schemas.Add(1))
	s, err := pgjournal.Open(ctx, dsn, pgjournal.WithSchema(schema))
	require.NoError(t, err, "Open()")
	require.NoError(t, s.Migrate(ctx), "Migrate()")
	t.Cleanup(func() {
		_ = s.DropSchema(context.Background(), schema)
		_ = s.Close()
	})
	return pgJournal{dsn: dsn, schema: schema, store: s}
}

// args prefixes args with the flags that select j.
func (j pgJournal) args(args ...string) []string {
	return append([]string{"-dsn", j.dsn, "-schema", j.schema}, args...)
}

// records are clitest.Records and, to show the scope in every read, the
// same key as default's k-unknown in another scope:
//
//	acct-2   k-unknown    pending     5m ago            the same key in another scope
func records(now time.Time) []*journal.Record {
	body := []byte(`{"amount":4}`)
	return append(clitest.Records(now), &journal.Record{
		Scope: "acct-2", Key: "k-unknown", Method: "POST", URL: "https://api.example.com/v1/orders",
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StatePending,
		Created: now.Add(-5 * time.Minute), Updated: now.Add(-5 * time.Minute),
	})
}

// creator is what both journals store records with.
type creator interface {
	Create(ctx context.Context, r *journal.Record) (*journal.Record, error)
}

func seed(t testing.TB, s creator, recs []*journal.Record) {
	t.Helper()
	for _, r := range recs {
		_, err := s.Create(context.Background(), r)
		require.NoError(t, err, "Create(%s)", r.Key)
	}
}

// seeded returns a PostgreSQL journal and a closed journal file holding
// the same records.
func seeded(t testing.TB) (pgJournal, string) {
	t.Helper()
	recs := records(time.Now())
	pg := newPG(t)
	seed(t, pg.store, recs)
	path := filepath.Join(t.TempDir(), "payments.journal")
	f, err := journal.Open(path)
	require.NoError(t, err)
	seed(t, f, recs)
	require.NoError(t, f.Close())
	return pg, path
}

// runIdem runs the command in-process.
func runIdem(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}
