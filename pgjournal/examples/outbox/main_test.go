package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutbox: a rolled-back transaction leaves neither the order nor the
// intent; a committed one is charged exactly once, by Run.
func TestOutbox(t *testing.T) {
	dsn := os.Getenv("IDEM_PG_DSN")
	if dsn == "" {
		if os.Getenv("IDEM_REQUIRE_PG") != "" {
			t.Fatal("IDEM_REQUIRE_PG is set but IDEM_PG_DSN is not")
		}
		t.Skip("IDEM_PG_DSN not set: run ./scripts/test.sh")
	}
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
