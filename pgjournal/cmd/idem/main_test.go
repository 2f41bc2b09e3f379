package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// The tests drive the command through run, as a shell would, on a
// PostgreSQL journal and on a bbolt journal file holding the same records.

const (
	secretToken = "Bearer sk_live_do_not_print"
	orderBody   = `{"amount":1250,"currency":"EUR"}`
)

// pgDSN is the test server's DSN, or skips the test when none is given and
// none is required (IDEM_REQUIRE_PG, set by scripts/test.sh and CI).
func pgDSN(t testing.TB) string {
	t.Helper()
	d := os.Getenv("IDEM_PG_DSN")
	if d == "" {
		if os.Getenv("IDEM_REQUIRE_PG") != "" {
			t.Fatal("IDEM_REQUIRE_PG is set but IDEM_PG_DSN is not: give the test server's DSN")
		}
		t.Skip("IDEM_PG_DSN not set: run ./scripts/test.sh, which starts a PostgreSQL for the tests")
	}
	return d
}

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

// records are operations in every interesting state, times relative to
// now:
//
//	scope    key          state       created  settled  notes
//	default  k-pending    pending     1h ago            one attempt with no outcome
//	default  k-unknown    unknown     3d ago            review "key expired", 2 attempts
//	default  k-succeeded  succeeded   60d ago  40d ago  resource ord_1
//	default  k-failed     failed      2h ago   1h ago   402
//	acct-2   k-other      processing  10m ago           resource pay_5
//	acct-2   k-unknown    pending     5m ago            the same key in another scope
func records(now time.Time) []*journal.Record {
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	const day = 24 * time.Hour
	hdr := http.Header{"Content-Type": {"application/json"}, "X-Request-Source": {"checkout"}}
	recs := []*journal.Record{
		{
			Scope: "default", Key: "k-pending", Ref: "order-1",
			Method: "POST", URL: "https://api.example.com/v1/orders", Header: hdr,
			Body: []byte(orderBody), State: journal.StatePending,
			Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: ago(time.Hour), Wrote: true}},
			Created:  ago(time.Hour), FirstSent: ago(time.Hour), Updated: ago(time.Hour),
		},
		{
			Scope: "default", Key: "k-unknown", Ref: "order-7",
			Method: "POST", URL: "https://api.example.com/v1/orders",
			QueryURL: "https://api.example.com/v1/operations/k-unknown",
			Header:   http.Header{"Content-Type": {"application/json"}, "Authorization": {secretToken}},
			Body:     []byte(orderBody), State: journal.StateUnknown, Review: "key expired",
			Attempts: []journal.Attempt{
				{Number: 1, Kind: journal.AttemptSubmit, Start: ago(3 * day), Wrote: true, Done: true,
					Status: 503, RetryAfter: 2 * time.Second, Duration: 120 * time.Millisecond},
				{Number: 2, Kind: journal.AttemptQuery, Start: ago(3*day - time.Minute), Wrote: true, Done: true,
					Err: "read tcp: i/o timeout", Duration: 10 * time.Second},
			},
			Created: ago(3 * day), FirstSent: ago(3 * day), Updated: ago(2 * day), NextDue: ago(day),
		},
		{
			Scope: "default", Key: "k-succeeded", Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: []byte(`{"amount":1}`), State: journal.StateSucceeded,
			Result:  &journal.Result{ResourceID: "ord_1", StatusCode: 201, Body: []byte(`{"id":"ord_1"}`)},
			Created: ago(60 * day), Updated: ago(40 * day), Settled: ago(40 * day),
		},
		{
			Scope: "default", Key: "k-failed", Method: "POST", URL: "https://api.example.com/v1/charges",
			Body: []byte(`{"amount":2}`), State: journal.StateFailed,
			Result:  &journal.Result{StatusCode: 402, Reason: "card declined"},
			Created: ago(2 * time.Hour), Updated: ago(time.Hour), Settled: ago(time.Hour),
		},
		{
			Scope: "acct-2", Key: "k-other", Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: []byte(`{"amount":3}`), State: journal.StateProcessing,
			Result:  &journal.Result{ResourceID: "pay_5", StatusCode: 202},
			Created: ago(10 * time.Minute), Updated: ago(5 * time.Minute),
		},
		{
			Scope: "acct-2", Key: "k-unknown", Method: "POST", URL: "https://api.example.com/v1/orders",
			Body: []byte(`{"amount":4}`), State: journal.StatePending,
			Created: ago(5 * time.Minute), Updated: ago(5 * time.Minute),
		},
	}
	for _, r := range recs {
		r.BodySHA = sha256.Sum256(r.Body)
	}
	return recs
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
