// Package pgtest is what the module's tests share to reach the test
// PostgreSQL server.
package pgtest

import (
	"os"
	"testing"
)

// DSN returns the test server's DSN (IDEM_PG_DSN, which scripts/postgres.sh
// exports), or skips the test when none is given and none is required
// (IDEM_REQUIRE_PG, set by scripts/test.sh and CI).
func DSN(tb testing.TB) string {
	tb.Helper()
	d := os.Getenv("IDEM_PG_DSN")
	if d == "" {
		if os.Getenv("IDEM_REQUIRE_PG") != "" {
			tb.Fatal("IDEM_REQUIRE_PG is set but IDEM_PG_DSN is not: give the test server's DSN")
		}
		tb.Skip("IDEM_PG_DSN not set: run ./scripts/test.sh, which starts a PostgreSQL for the tests")
	}
	return d
}
