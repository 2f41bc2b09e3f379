package main

import (
	"context"
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
		`note: operations open to it that may have executed are flagged "key ignored" (never resent); they teach it again at the next Resume or start: settle them (idem list -review)`+"\n", stdout)
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
// Migrate, exit status 1.
func TestDSNKeyIgnoringUnmigrated(t *testing.T) {
	pg := newPG(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP TABLE `+pgx.Identifier{pg.schema, "key_ignoring"}.Sanitize()+`;
		DELETE FROM `+pgx.Identifier{pg.schema, "schema_version"}.Sanitize()+` WHERE version = 2`)
	require.NoError(t, err, "the schema back at version 1")

	for _, args := range [][]string{{"key-ignoring"}, {"key-ignoring", "remove", ordersEndpoint}} {
		stdout, stderr, code := runIdem(t, pg.args(args...)...)
		require.Equal(t, 1, code, "%q: %s", args, stderr)
		require.Empty(t, stdout, "%q", args)
		require.Contains(t, stderr, "hint: the service's pgjournal Migrate brings the schema to version 2, which keeps them", "%q", args)
		require.NotContains(t, stderr, "holds no idem journal", "%q", args)
		require.NotContains(t, stderr, "idem: idem:", "%q", args)
	}
}
