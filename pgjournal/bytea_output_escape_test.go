package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestByteaOutputEscape: a database, role or server whose bytea_output is
// escape, kept for an older application (PostgreSQL's documentation,
// runtime-config-client.html: "bytea_output (enum) Sets the output format
// for values of type bytea. Valid values are hex (the default) and escape
// (the traditional PostgreSQL format)"), set here as the sessions'
// default, as ALTER DATABASE ... SET bytea_output = 'escape' sets it.
// pgx reads results as text in its exec and simple-protocol modes (the
// modes the package doc gives for PgBouncer in transaction mode), and
// decoded the data column as hex only: every read of a record failed
// ("invalid hex format"). A Submit was journaled and sent, then its
// outcome could not be written (1 order, the operation unknown), and Run
// could claim nothing to settle it. Now every read decodes either format,
// in every mode: the Submit succeeds (1 submit, 1 order), and Claim,
// ClaimDue, ForEachOpen, Due and List read the record.
func TestByteaOutputEscape(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			s := openStoreWith(t, func(pc *pgxpool.Config) {
				pc.ConnConfig.RuntimeParams["bytea_output"] = "escape"
				pc.ConnConfig.DefaultQueryExecMode = mode
			})
			srv, err := idemtest.NewServer()
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			c := newClient(t, s, srv)
			req := order(srv, "escaped")
			req.Body = []byte(`{"amount":1,"note":"café \\ ok"}`)
			res, err := c.Submit(ctx, req)
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, 1, submits(srv, req.Key), "submits")
			require.Equal(t, 1, srv.Effects("", req.Key), "orders made")
			rec, err := s.Get(ctx, idem.DefaultScope, req.Key)
			require.NoError(t, err)
			require.Equal(t, journal.StateSucceeded, rec.State)
			require.Equal(t, req.Body, rec.Body, "the body, its bytes above 0x7f and its backslash escaped in the output")

			// Every other read of a record: claims, scans.
			mustCreate(t, s, "claimed", "due")
			now := time.Now()
			got, _, err := s.Claim(ctx, "acct", "claimed", "replica-a", now, now.Add(time.Minute))
			require.NoError(t, err)
			require.Equal(t, "claimed", got.Key)
			_, _, err = s.Claim(ctx, "acct", "claimed", "replica-b", now, now.Add(time.Minute))
			require.ErrorIs(t, err, journal.ErrLeased, "read with the lease another holds")
			due, err := s.Due(ctx, now, 0)
			require.NoError(t, err)
			require.Len(t, due, 2, "due records")
			claims, err := s.ClaimDue(ctx, "replica-b", now, now.Add(time.Minute), 0)
			require.NoError(t, err)
			require.Len(t, claims, 1, "records ClaimDue took")
			require.Equal(t, "due", claims[0].Record.Key)
			open := 0
			require.NoError(t, s.ForEachOpen(ctx, func(*journal.Record) error { open++; return nil }))
			require.Equal(t, 2, open, "open records")
			all, err := s.List(ctx, journal.Filter{})
			require.NoError(t, err)
			require.Len(t, all, 3, "records")
		})
	}
}
