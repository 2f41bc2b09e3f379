package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgjournal"
)

// BenchmarkJournals compares the PostgreSQL journal (module pgjournal)
// with the bbolt journal and bare net/http, at 1 and 64 callers,
// interleaved, fsync on both sides (PostgreSQL's synchronous_commit stays
// on). The PostgreSQL contender also reports its statements (round trips)
// and its commits (autocommitted writes and COMMITs) per operation, and
// the CPU time of the PostgreSQL server's processes per operation
// (pg-cpu-µs/op: they share the machine's cores with the client). It
// needs a server: IDEM_PG_DSN (scripts/postgres.sh starts one).
func BenchmarkJournals(b *testing.B) {
	dsn := os.Getenv("IDEM_PG_DSN")
	if dsn == "" {
		b.Skip("IDEM_PG_DSN not set: source scripts/postgres.sh && pg_start, then run again")
	}
	pgC := contender{"idem-postgres", func(string) (client, error) { return openPG(dsn, pgPoolSize) }}
	// pgxpool's default pool, max(4, NumCPU) connections: what Open gives
	// without pool_max_conns in the DSN.
	pg4C := contender{"idem-postgres-pool4", func(string) (client, error) { return openPG(dsn, 4) }}
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			contenders := []contender{pgC, idemC, bareC}
			if callers > 1 {
				contenders = append(contenders, pg4C)
			}
			interleave(b, contenders, func(b *testing.B, c contender) {
				withClient(b, c, func(cl client) {
					pg, _ := cl.(*pgClient)
					var cpu0 time.Duration
					if pg != nil {
						pg.count.reset()
						cpu0 = pg.serverCPU()
					}
					runOps(b, cl, servers.plain+"/v1/orders", callers)
					if pg != nil {
						pg.count.report(b, callers)
						b.ReportMetric(float64((pg.serverCPU()-cpu0).Microseconds())/float64(b.N+callers), "pg-cpu-µs/op")
					}
				})
			})
		})
	}
}

// pgPoolSize is the PostgreSQL contender's pool (pool_max_conns=64 in a
// DSN): as many connections as callers, so that no caller queues for one.
const pgPoolSize = 64

var pgSchemas atomic.Int64

// pgClient is idem's Submit on the PostgreSQL journal, on a fresh schema
// dropped at close.
type pgClient struct {
	idemClient
	store  *pgjournal.Store
	pool   *pgxpool.Pool
	schema string
	count  *stmtCounter
	// postmaster is the PostgreSQL server's main process: its children
	// are the backends, the WAL writer and the rest.
	postmaster int
}

func openPG(dsn string, poolSize int32) (client, error) {
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = poolSize
	count := &stmtCounter{}
	pc.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	schema := fmt.Sprintf("bench%d_%d", os.Getpid(), pgSchemas.Add(1))
	s, err := pgjournal.New(pool, pgjournal.WithSchema(schema))
	if err == nil {
		err = s.Migrate(ctx)
	}
	var c *idem.Client
	if err == nil {
		c, err = idem.New(s)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	var backend int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		pool.Close()
		return nil, err
	}
	postmaster, _ := procStat(backend)
	return &pgClient{idemClient: idemClient{c: c}, store: s, pool: pool, schema: schema, count: count, postmaster: postmaster}, nil
}

// serverCPU is the CPU time so far of the PostgreSQL server's processes
// (on this machine: its socket is local), or 0 if /proc says nothing.
func (c *pgClient) serverCPU() time.Duration {
	if c.postmaster <= 0 {
		return 0
	}
	_, total := procStat(c.postmaster)
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if ppid, cpu := procStat(pid); ppid == c.postmaster {
			total += cpu
		}
	}
	return total
}

// procStat reads a process's parent and CPU time (user + system) from
// /proc/PID/stat; zeros when it cannot.
func procStat(pid int) (ppid int, cpu time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, time.Duration(ut+st) * 10 * time.Millisecond
}

func (c *pgClient) close() {
	_ = c.c.Close()
	_ = c.store.DropSchema(context.Background(), c.schema)
	c.pool.Close()
}

// stmtCounter counts the statements the pool sends and the commits among
// them: a write outside a transaction commits by itself, and so does a
// batch (one pipeline, one round trip) that writes outside a transaction:
// PostgreSQL runs it as one implicit transaction.
type stmtCounter struct {
	stmts, commits atomic.Int64
	inTx           atomic.Int64 // open transactions (BEGIN seen, no COMMIT/ROLLBACK yet)
}

func (s *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.stmts.Add(1)
	q := strings.ToUpper(strings.TrimSpace(d.SQL))
	switch {
	case strings.HasPrefix(q, "BEGIN"):
		s.inTx.Add(1)
	case strings.HasPrefix(q, "COMMIT"):
		s.inTx.Add(-1)
		s.commits.Add(1)
	case strings.HasPrefix(q, "ROLLBACK"):
		s.inTx.Add(-1)
	case s.inTx.Load() == 0 && (strings.HasPrefix(q, "INSERT") || strings.HasPrefix(q, "UPDATE") ||
		strings.HasPrefix(q, "DELETE") || strings.HasPrefix(q, "WITH")):
		s.commits.Add(1)
	}
	return ctx
}

func (s *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	s.stmts.Add(int64(d.Batch.Len()))
	explicit, writes := s.inTx.Load() != 0, false
	for _, q := range d.Batch.QueuedQueries {
		sql := strings.ToUpper(strings.TrimSpace(q.SQL))
		switch {
		case strings.HasPrefix(sql, "BEGIN"):
			explicit = true
		case strings.HasPrefix(sql, "COMMIT"):
			s.commits.Add(1)
		case strings.HasPrefix(sql, "INSERT"), strings.HasPrefix(sql, "UPDATE"),
			strings.HasPrefix(sql, "DELETE"), strings.HasPrefix(sql, "WITH"):
			writes = true
		}
	}
	if writes && !explicit {
		s.commits.Add(1)
	}
	return ctx
}

func (s *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *stmtCounter) reset() { s.stmts.Store(0); s.commits.Store(0) }

// report divides the counts by the operations runOps made: b.N plus its
// warm-up of one per caller.
func (s *stmtCounter) report(b *testing.B, callers int) {
	n := float64(b.N + callers)
	b.ReportMetric(float64(s.stmts.Load())/n, "stmts/op")
	b.ReportMetric(float64(s.commits.Load())/n, "commits/op")
}
