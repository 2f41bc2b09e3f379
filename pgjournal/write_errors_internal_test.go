package pgjournal

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestCallErr: what the server answered, and anything before the COMMIT
// was sent, did not commit; a connection that broke, or a
// context that ended, while the COMMIT was in flight may have committed
// it (journal.ErrMaybeCommitted: the client then says ErrUnknownOutcome,
// never "nothing journaled").
func TestCallErr(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(live)
	cancel()
	tests := []struct {
		name       string
		ctx        context.Context
		err        error
		committing bool
		maybe      bool
	}{
		{"server refused", live, &pgconn.PgError{Code: "23505", Message: "duplicate key"}, true, false},
		{"server terminated the statement", live, &pgconn.PgError{Code: "57P01", Message: "terminating connection"}, true, false},
		{"COMMIT rolled back", live, pgx.ErrTxCommitRollback, true, false},
		// PgBouncer's answer when its server connection broke (src/server.c).
		{"pooler lost the server before COMMIT", live, &pgconn.PgError{Severity: "FATAL", Code: "08P01", Message: "server conn crashed?"}, false, false},
		{"pooler lost the server in COMMIT", live, &pgconn.PgError{Severity: "FATAL", Code: "08P01", Message: "server conn crashed?"}, true, true},
		// A failed WAL flush PANICs the server, which restarts and finds
		// the commit on recovery (pgx v5.12 reports EOF instead: "EOF in
		// COMMIT"); a pooler or a later pgx that passes the PANIC on must
		// not make it read as refused.
		{"PANIC in COMMIT", live, &pgconn.PgError{Severity: "PANIC", SeverityUnlocalized: "PANIC", Code: "58030", Message: "could not fdatasync file \"000000010000000000000001\": Input/output error"}, true, true},
		{"localized PANIC in COMMIT", live, &pgconn.PgError{Severity: "PANIK", SeverityUnlocalized: "PANIC", Code: "XX000", Message: "konnte Datei nicht fdatasyncen"}, true, true},
		{"connection reset before COMMIT", live, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, false, false},
		{"connection reset in COMMIT", live, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true, true},
		{"EOF in COMMIT", live, io.ErrUnexpectedEOF, true, true},
		{"cancelled before COMMIT", ended, context.Canceled, false, false},
		{"cancelled in COMMIT", ended, context.Canceled, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := callErr(tt.ctx, "update", tt.err, tt.committing)
			require.ErrorIs(t, got, tt.err, "cause kept")
			require.Equal(t, tt.maybe, errors.Is(got, journal.ErrMaybeCommitted), "maybe committed: %v", got)
		})
	}
	require.NoError(t, callErr(live, "update", nil, true))
}

// TestCutErrorSaysWhichContext: a call the Store's bound ended names
// WithCallTimeout and its length; one its caller's context ended says
// so, not WithCallTimeout.
func TestCutErrorSaysWhichContext(t *testing.T) {
	s := &Store{callTimeout: time.Millisecond}
	bounded, cancel := s.bound(context.Background())
	defer cancel()
	<-bounded.Done()
	err := callErr(bounded, "update", context.DeadlineExceeded, false)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "WithCallTimeout: 1ms")

	caller, stop := context.WithCancel(context.Background())
	stop()
	bounded, cancel = s.bound(caller)
	defer cancel()
	err = callErr(bounded, "update", context.Canceled, false)
	require.ErrorIs(t, err, context.Canceled)
	require.NotContains(t, err.Error(), "WithCallTimeout")
	require.ErrorContains(t, err, "the call's context ended")
}
