package pgjournal_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// setNewer makes the stored record of key one written by a newer idem, as
// a rollback leaves it: its record version byte above this build's, the
// row's columns as that idem wrote them. It returns the record's data.
func setNewer(t *testing.T, s *pgjournal.Store, scope, key string) []byte {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	table := pgx.Identifier{s.Schema(), "records"}.Sanitize()
	var data []byte
	require.NoError(t, conn.QueryRow(ctx, `UPDATE `+table+` SET data = set_byte(data, 2, $3)
		WHERE scope = $1 AND key = $2 RETURNING data`, scope, key, journal.RecordVersion+1).Scan(&data))
	return data
}

// TestScansSkipOpenRecordFromNewerIdem: the scans of open records skip
// one a newer idem wrote (ClaimDue's transaction, which a record it
// cannot decode rolls back, never meets it), and leave it untouched (see
// journaltest.NewerOpenRecord).
func TestScansSkipOpenRecordFromNewerIdem(t *testing.T) {
	ctx := context.Background()
	var logged bytes.Buffer
	s := openStoreWith(t, nil, pgjournal.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	for _, r := range journaltest.NewerRecords() {
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	written := setNewer(t, s, "s", journaltest.NewerKey)
	journaltest.NewerOpenRecord(t, s, logged.String)
	require.Equal(t, written, setNewer(t, s, "s", journaltest.NewerKey), "its bytes untouched")
}

// TestListSkipsRecordsFromNewerIdem: List leaves out the records a newer
// idem wrote, settled and open, in its query (their columns, as that idem
// wrote them, may match the filter: a flagged one matched Review and
// failed the whole list), and Stats counts the open one apart (see
// journaltest.NewerListed). NewerOpen counts the open one, not the
// settled one: idem.RemoveKeyIgnoring asks it rather than Stats, which
// reads the whole table and timed out on a large retained one, failing
// every removal (TestRemoveKeyIgnoringOverDamagedSettledPage, in package
// journal, for the bbolt journal).
func TestListSkipsRecordsFromNewerIdem(t *testing.T) {
	s := openStoreWith(t, nil)
	require.Implements(t, (*idem.NewerOpenCounter)(nil), s)
	journaltest.CreateNewerListRecords(t, s)
	for _, k := range journaltest.NewerListKeys {
		setNewer(t, s, "s", k)
	}
	journaltest.NewerListed(t, s)
}
