package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/pgjournal/internal/pgtest"
)

// TestOutbox: a rolled-back transaction leaves neither the order nor the
// intent; a committed one is charged exactly once, by Run.
func TestOutbox(t *testing.T) {
	dsn := pgtest.DSN(t)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), dsn, fmt.Sprintf("outbox_test_%d", os.Getpid()), &out))
	want := `order A: rolled back (stock check failed)
order B: committed
charge B: succeeded ord_000001
charge A journaled: false
orders in the database: 1
charges on the server: 1
`
	require.Equal(t, want, out.String())
}
