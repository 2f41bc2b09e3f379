// Command outbox shows the outbox pattern with the PostgreSQL journal: an
// order row and the intent to charge for it commit or roll back together,
// in the service's own transaction, and Run (on any replica) sends what
// was committed, exactly once.
//
//	go run ./examples/outbox -dsn 'postgres://user@localhost/db'
//
// It starts a fake payment API on 127.0.0.1, creates the schema
// "outbox_demo" (and drops it when done), and prints what happened.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/pgjournal"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("IDEM_PG_DSN"), "PostgreSQL DSN (default $IDEM_PG_DSN)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "outbox: give -dsn postgres://… (or set IDEM_PG_DSN)")
		os.Exit(2)
	}
	if err := run(context.Background(), *dsn, "outbox_demo", os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, schema string, out io.Writer) error {
	srv, err := idemtest.NewServer()
	if err != nil {
		return err
	}
	defer srv.Close()

	// One pool for the service's own tables and for the journal: the
	// intent must be written in the service's transaction.
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := pgjournal.New(pool, pgjournal.WithSchema(schema))
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	defer store.DropSchema(context.WithoutCancel(ctx), schema)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY, amount int NOT NULL)`); err != nil {
		return err
	}

	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithResultEndpoint(srv.ResultTemplate()),
		idem.WithReconcile(50*time.Millisecond, time.Second, time.Hour))
	if err != nil {
		return err
	}
	defer c.Close()

	// placeOrder writes the order and the intent to charge for it in one
	// transaction; fail makes the service's own work fail after both.
	placeOrder := func(id string, fail bool) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO `+orders+` VALUES ($1, 1999)`, id); err != nil {
				return err
			}
			if _, err := store.PrepareTx(ctx, tx, c, idem.Request{
				Key: "charge-" + id, URL: srv.URL + "/charges", Body: []byte(`{"order":"` + id + `","amount":1999}`),
			}); err != nil {
				return err
			}
			if fail {
				return errors.New("stock check failed")
			}
			return nil
		})
	}
	fmt.Fprintln(out, "order A:", result(placeOrder("A", true)))
	fmt.Fprintln(out, "order B:", result(placeOrder("B", false)))

	// Run, on this replica or any other, sends what was committed.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = c.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		op, err := c.Lookup(ctx, "", "charge-B")
		if err != nil {
			return err
		}
		if op.State == idem.StateSucceeded {
			fmt.Fprintln(out, "charge B:", op.State, op.Result.ResourceID)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("charge B still %s", op.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = c.Lookup(ctx, "", "charge-A")
	fmt.Fprintln(out, "charge A journaled:", !errors.Is(err, idem.ErrNotFound))
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+orders).Scan(&n); err != nil {
		return err
	}
	fmt.Fprintln(out, "orders in the database:", n)
	fmt.Fprintln(out, "charges on the server:", srv.Stats().SideEffects)
	return nil
}

func result(err error) string {
	if err != nil {
		return "rolled back (" + err.Error() + ")"
	}
	return "committed"
}
