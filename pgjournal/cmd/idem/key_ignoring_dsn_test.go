package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// ordersEndpoint is the endpoint of clitest.Records' orders, journaled
// below as ignoring the key, as a Client names it after an answer said
// so: Solidgate's payment endpoints say so per endpoint ("Idempotency
// support varies by endpoint. [...] A value of ignored means the endpoint
// does not", https://api-docs.solidgate.com/api/v2/idempotent-requests).
const ordersEndpoint = "POST https://api.example.com/v1/orders"

// key-ignoring on the live PostgreSQL journal: list prints what the
// journal keeps, remove removes it, and first flags k-pending, whose one
// send there may have executed (written, no answer) while the endpoint
// ignored the key, which kept no key for it: a replica started without
// the endpoint would have resent it under the same key, a second order.
// k-unknown, flagged already, keeps its flag; acct-2's k-unknown, never
// sent, is left to be sent. Removing it again is an error saying so.
func TestDSNKeyIgnoring(t *testing.T) {
	pg := newPG(t)
	seed(t, pg.store, records(time.Now()))
	ctx := context.Background()
	require.NoError(t, pg.store.AddKeyIgnoring(ctx, ordersEndpoint))

	stdout, stderr, code := runIdem(t, pg.args("key-ignoring")...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "ENDPOINT\n"+ordersEndpoint+"\n", stdout)

	stdout, stderr, code = runIdem(t, pg.args("key-ignoring", "remove", ordersEndpoint)...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "removed "+ordersEndpoint+": an operation to it whose answer is lost is resent under the same key again\n"+
		`note: flagged 1 open operation(s) to it that may have executed "key ignored" (never resent); until settled, each operation so flagged teaches it again `+
		`(at Resume, a Run pass that reads them, a process's next start): settle them (idem list -review)`+"\n", stdout)
	for _, tc := range []struct{ scope, key, review string }{
		{"default", "k-pending", journal.ReviewKeyIgnored},
		{"default", "k-unknown", "key expired"},
		{"acct-2", "k-unknown", ""},
	} {
		rec, err := pg.store.Get(ctx, tc.scope, tc.key)
		require.NoError(t, err)
		require.Equal(t, tc.review, rec.Review, "journal: %s/%s's Review", tc.scope, tc.key)
	}

	stdout, stderr, code = runIdem(t, pg.args("key-ignoring", "-json")...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "{\n  \"endpoints\": []\n}\n", stdout)
	stdout, stderr, code = runIdem(t, pg.args("key-ignoring", "remove", ordersEndpoint)...)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, `idem: no endpoint "`+ordersEndpoint+`" is known to ignore the idempotency key; list them with `+
		"`idem key-ignoring`"+` and pass one as listed ("METHOD URL")`+"\n", stderr)
}

// A schema still at version 1 (the service's build newer than its last
// Migrate) has no table for the endpoints: list and remove say to run
// Migrate, exit status 1. The journal then knows the endpoint only from
// an open operation flagged ReviewKeyIgnored for it: with none, remove
// flags nothing (an endpoint not known to ignore the key may
// de-duplicate) and says nothing of flags; once one is (k-flagged), it
// flags k-pending, whose one send there may have executed, all the same,
// and the hint counts it.
func TestDSNKeyIgnoringUnmigrated(t *testing.T) {
	pg := seededThen(t, "the schema back at version 1", func(table func(string) string) string {
		return `DROP TABLE ` + table("key_ignoring") + `;
		DELETE FROM ` + table("schema_version") + ` WHERE version = 2`
	})
	ctx := context.Background()

	for _, args := range [][]string{{"key-ignoring"}, {"key-ignoring", "remove", ordersEndpoint}} {
		stdout, stderr, code := runIdem(t, pg.args(args...)...)
		require.Equal(t, 1, code, "%q: %s", args, stderr)
		require.Empty(t, stdout, "%q", args)
		require.Contains(t, stderr, "hint: the service's pgjournal Migrate brings the schema to version 2, which keeps them", "%q", args)
		require.NotContains(t, stderr, "holds no idem journal", "%q", args)
		require.NotContains(t, stderr, "idem: idem:", "%q", args)
		require.NotContains(t, stderr, "were flagged", "%q: nothing known, nothing flagged", args)
	}
	rec, err := pg.store.Get(ctx, "default", "k-pending")
	require.NoError(t, err)
	require.Empty(t, rec.Review, "journal: k-pending's Review, the endpoint not known")

	// An operation flagged for the endpoint (its answer said so; acct-2's
	// k-unknown stands in for it here) makes it known.
	_, err = pg.store.Update(ctx, "acct-2", "k-unknown", func(r *journal.Record) error {
		r.Review = journal.ReviewKeyIgnored
		return nil
	})
	require.NoError(t, err)
	_, stderr, code := runIdem(t, pg.args("key-ignoring", "remove", ordersEndpoint)...)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, `hint: 1 open operation(s) to it that may have executed were flagged "key ignored" all the same (never resent)`)
	_, stderr, _ = runIdem(t, pg.args("key-ignoring", "remove", ordersEndpoint)...)
	require.NotContains(t, stderr, "were flagged", "removed again: k-pending flagged already")
	rec, err = pg.store.Get(ctx, "default", "k-pending")
	require.NoError(t, err)
	require.Equal(t, journal.ReviewKeyIgnored, rec.Review, "journal: k-pending's Review")
}

// resolve on the live PostgreSQL journal of acct-2's k-other, flagged
// "key ignored" for the orders endpoint, which the journal does not keep
// (its save failed: the flag is its one trace), cleared the flag without
// journaling the endpoint: a replica started afterwards took it for one
// that de-duplicates and resent k-pending there under the same key
// (modelled: a second order). resolve now journals the endpoint first.
func TestDSNResolveOfAKeyIgnoredFlagJournalsItsEndpointFirst(t *testing.T) {
	pg := newPG(t)
	seed(t, pg.store, records(time.Now()))
	ctx := context.Background()
	_, stderr, code := resolveOtherFlagged(t, pg)
	require.Equal(t, 0, code, stderr)
	got, err := pg.store.Get(ctx, "acct-2", "k-other")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, got.State, "journal: k-other resolved")
	kept, err := pg.store.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{ordersEndpoint}, kept, "endpoints journaled as ignoring the key")
}

// As above, the journal's endpoints at their bound (paths with ids): the
// endpoint cannot be journaled, so resolve exits 1 having written
// nothing, k-other still open and flagged, and says how to make room,
// naming idem once.
func TestDSNResolveOfAKeyIgnoredFlagWithTheStoreFullWritesNothing(t *testing.T) {
	pg := seededThen(t, "the endpoints at their bound", func(table func(string) string) string {
		return `INSERT INTO ` + table("key_ignoring") + ` (endpoint)
		SELECT 'POST https://api.example.com/customers/cus_' || i || '/charges' FROM generate_series(1, ` + strconv.Itoa(journal.MaxKeyIgnoringEndpoints) + `) AS i`
	})
	ctx := context.Background()
	stdout, stderr, code := resolveOtherFlagged(t, pg)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stderr, "make room (idem key-ignoring remove")
	require.NotContains(t, stderr, "idem: idem:")
	got, err := pg.store.Get(ctx, "acct-2", "k-other")
	require.NoError(t, err)
	require.Equal(t, journal.StateProcessing, got.State, "journal: k-other left open")
	require.Equal(t, journal.ReviewKeyIgnored, got.Review, "journal: k-other still flagged")
}

// seededThen is a journal of records(now) on which the SQL statements
// sql returns have then run, table naming a table of the journal's schema.
func seededThen(t *testing.T, what string, sql func(table func(string) string) string) pgJournal {
	t.Helper()
	pg := newPG(t)
	seed(t, pg.store, records(time.Now()))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql(func(name string) string { return pgx.Identifier{pg.schema, name}.Sanitize() }))
	require.NoError(t, err, what)
	return pg
}

// resolveOtherFlagged flags acct-2's k-other "key ignored" for the orders
// endpoint, its one trace, and runs resolve of it as succeeded.
func resolveOtherFlagged(t *testing.T, pg pgJournal) (stdout, stderr string, code int) {
	t.Helper()
	_, err := pg.store.Update(context.Background(), "acct-2", "k-other", func(r *journal.Record) error {
		r.Review = journal.ReviewKeyIgnored
		return nil
	})
	require.NoError(t, err)
	return runIdem(t, pg.args("resolve", "-scope", "acct-2", "k-other", "-succeeded", "-reason", "one charge in the dashboard", "-by", "ops")...)
}
