package pgjournal

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestWriteErr: what the server answered, or what never left, did not
// commit; a connection that broke while the statement was in flight may
// have committed it (journal.ErrMaybeCommitted: the client then says
// ErrUnknownOutcome, never "nothing journaled").
func TestWriteErr(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		maybe bool
	}{
		{"server refused", &pgconn.PgError{Code: "23505", Message: "duplicate key"}, false},
		{"server terminated the statement", &pgconn.PgError{Code: "57P01", Message: "terminating connection"}, false},
		{"connection reset in flight", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true},
		{"EOF in flight", io.ErrUnexpectedEOF, true},
		{"cancelled in flight", context.Canceled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := writeErr(tt.err)
			require.ErrorIs(t, got, tt.err, "cause kept")
			require.Equal(t, tt.maybe, errors.Is(got, journal.ErrMaybeCommitted), "maybe committed: %v", got)
		})
	}
	require.NoError(t, writeErr(nil))
}
