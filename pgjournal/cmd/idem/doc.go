// Command idem is cmd/idem, the operator tool of idem journals, with one
// more way to reach the operations: -dsn, the PostgreSQL journal of
// package pgjournal, read and settled while the service's replicas run.
//
//	go install github.com/idemkit/idem/pgjournal/cmd/idem@latest
//
// It accepts everything cmd/idem does (-journal for a stopped bbolt file,
// -url for a service's admin handler), plus:
//
//	-dsn DSN      the journal's database (postgres://user@host/db or
//	              key=value pairs, as pgx reads them)
//	-schema NAME  the journal's schema (default pgjournal.DefaultSchema)
//
// With -dsn, list, show and stats read the live journal and print what
// they print for a journal file with the same records; stats' first line
// names the database (never its password) and the schema. key-ignoring
// lists the endpoints the journal keeps as ignoring the idempotency key,
// and its remove removes one, after flagging for review the open
// operations to it that may have executed (idem.RemoveKeyIgnoring); a
// replica that learnt it keeps it in memory until restarted. A schema
// Migrate has not brought to version 2 keeps none: remove exits 1 saying
// so; it knows the endpoint then only from an open operation flagged for
// it, and then flags the others that may have executed there all the
// same (never resent), which a hint counts. check, compact and prune work
// on a bbolt file only and refuse -dsn. Give the password in PGPASSWORD
// or a .pgpass file rather than in the DSN: a command line is visible to
// every user of the machine.
//
// # Resolve and leases
//
// A replica driving an operation holds its lease. resolve first claims
// the operation under the tool's own owner name (idem-cli@HOST/PID), then
// settles it with that lease on the write, and gives the lease up. While a
// replica holds a live lease, resolve refuses (exit status 1) and says who
// holds it and until when: that replica may be sending the request right
// now. -force takes the lease over: the new lease's fencing token makes
// the replica's next write fail with journal.ErrLeaseLost, so its late
// answer cannot overwrite the resolution, and the replica stops driving
// the operation. -force also changes an operation already succeeded or
// failed, as with a journal file (nobody drives a settled operation).
package main
