package pgjournal_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// A traced is one call a recordingTracer heard.
type traced struct {
	what string // "query start", "query end", "batch start", "batch end"
	sql  string // the query's
	tag  string // a query end's command tag
	err  error  // an end's error
	conn *pgx.Conn
	span int // the number TraceQueryStart put in the context the end got; 0 for a batch
}

type spanKey struct{}

// recordingTracer is a pgx QueryTracer and BatchTracer, as an
// application's SQL tracing (otelpgx, tracelog) is, that records what it
// is told in order. Each query's start puts a number in the context it
// returns, as a tracer puts its span, and its end records the number it
// gets back.
type recordingTracer struct {
	mu    sync.Mutex
	calls []traced
	spans int
}

func (r *recordingTracer) add(c traced) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// take returns what was heard since the last take.
func (r *recordingTracer) take() []traced {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.calls
	r.calls = nil
	return calls
}

func (r *recordingTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.spans++
	span := r.spans
	r.mu.Unlock()
	r.add(traced{what: "query start", sql: d.SQL, conn: conn, span: span})
	return context.WithValue(ctx, spanKey{}, span)
}

func (r *recordingTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	span, _ := ctx.Value(spanKey{}).(int)
	r.add(traced{what: "query end", tag: d.CommandTag.String(), err: d.Err, conn: conn, span: span})
}

func (r *recordingTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.add(traced{what: "batch start", conn: conn})
	return ctx
}

func (r *recordingTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *recordingTracer) TraceBatchEnd(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	r.add(traced{what: "batch end", err: d.Err, conn: conn})
}

// commits returns the COMMITs in calls: each one's start and its end.
func commits(t *testing.T, calls []traced) (starts, ends []traced) {
	t.Helper()
	open := map[int]bool{}
	for _, c := range calls {
		switch {
		case c.what == "query start" && c.sql == "COMMIT":
			starts = append(starts, c)
			open[c.span] = true
		case c.what == "query end" && open[c.span]:
			ends = append(ends, c)
			delete(open, c.span)
		}
	}
	require.Empty(t, open, "a COMMIT traced with no end")
	return starts, ends
}

// openTracedStore opens a Store whose pool's connections have tracer as
// their QueryTracer (pgxpool.Config.ConnConfig.Tracer), passing through
// wrap's when it is not nil; what the tracer heard while the Store was
// opened and migrated is dropped.
func openTracedStore(t *testing.T, tracer *recordingTracer, wrap func(net.Conn) net.Conn) *pgjournal.Store {
	t.Helper()
	s := openStoreWith(t, func(pc *pgxpool.Config) {
		pc.ConnConfig.Tracer = tracer
		if wrap != nil {
			wrapDial(pc, wrap)
		}
	})
	tracer.take()
	return s
}

// TestCommitTraced: the COMMIT that ends each write's transaction is the
// statement whose answer waits for the WAL flush and any synchronous
// standby (PostgreSQL's synchronous_commit "specifies how much WAL
// processing must complete before the database server returns a
// "success" indication to the client",
// https://www.postgresql.org/docs/current/runtime-config-wal.html), and
// pgx hands a pool's tracer its calls ("QueryTracer traces Query,
// QueryRow, and Exec.",
// https://pkg.go.dev/github.com/jackc/pgx/v5#QueryTracer). pgjournal
// sends the COMMIT on the wire itself (commit), so the pool's tracer saw
// each write's batch and never its COMMIT: 0 COMMITs traced for a create
// (the committer's transaction) and for a prune (a Store's own). Now it
// sees one for each, on the batch's connection, after the batch, ended
// with the server's tag, with the context its start returned.
func TestCommitTraced(t *testing.T) {
	ctx := context.Background()
	tracer := &recordingTracer{}
	s := openTracedStore(t, tracer, nil)
	now := time.Now().UTC()

	for _, write := range []struct {
		name string
		do   func() error
	}{
		{"create", func() error {
			_, err := s.Create(ctx, journaltest.NewRecord("acct", "k-traced", now))
			return err
		}},
		{"prune", func() error {
			_, err := s.Prune(ctx, now.Add(time.Hour))
			return err
		}},
	} {
		require.NoError(t, write.do(), write.name)
		calls := tracer.take()
		starts, ends := commits(t, calls)
		require.Len(t, starts, 1, "%s: COMMITs traced: %+v", write.name, calls)
		require.Len(t, ends, 1, write.name)
		require.Equal(t, "COMMIT", ends[0].tag, write.name)
		require.NoError(t, ends[0].err, write.name)
		require.Equal(t, starts[0].span, ends[0].span, "%s: the end got the context the start returned", write.name)

		var batchEnd *traced
		for i, c := range calls {
			if c.what == "batch end" {
				batchEnd = &calls[i]
			}
			if c.what == "query start" && c.sql == "COMMIT" {
				break
			}
		}
		require.NotNil(t, batchEnd, "%s: the transaction's batch was traced before its COMMIT", write.name)
		require.NoError(t, batchEnd.err, write.name)
		require.Same(t, batchEnd.conn, starts[0].conn, "%s: the COMMIT traced on the batch's connection", write.name)
		require.Same(t, starts[0].conn, ends[0].conn, write.name)
	}
}

// TestCommitTracedWhenCut: tracing the COMMIT changes nothing of what a
// write reports when its connection breaks (see TestAmbiguousCommit): one
// whose COMMIT was sent, committed or not, still reports
// journal.ErrMaybeCommitted, and the tracer's COMMIT ends with the
// error the connection gave; one cut before its COMMIT was sent reports a
// plain error and traces no COMMIT.
func TestCommitTracedWhenCut(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	for _, at := range []cut{afterCommit, beforeCommit, unsent} {
		t.Run(cutNames[at], func(t *testing.T) {
			tracer := &recordingTracer{}
			c := &commitCutter{committed: make(chan bool, 1)}
			s := openTracedStore(t, tracer, func(conn net.Conn) net.Conn { return &cutterConn{Conn: conn, c: c} })
			c.arm("cut-here", at)
			_, err := s.Create(ctx, journaltest.NewRecord("acct", "cut-here", now))
			requireCut(t, err, at, "Create()")
			require.Equal(t, at == afterCommit, c.wait(t), "committed")

			starts, ends := commits(t, tracer.take())
			if at == unsent {
				require.Empty(t, starts, "a COMMIT never sent is not traced")
				return
			}
			require.Len(t, starts, 1)
			require.Error(t, ends[0].err, "the COMMIT's trace ends with the cut")
			require.NotErrorIs(t, ends[0].err, journal.ErrMaybeCommitted, "the trace gets pgx's error, not the Store's verdict")
			require.Empty(t, ends[0].tag)

			got, err := s.Get(ctx, "acct", "cut-here")
			if at == afterCommit {
				require.NoError(t, err, "Get() after a create committed")
				require.Equal(t, "cut-here", got.Key)
			} else {
				require.ErrorIs(t, err, journal.ErrNotFound, "Get() after a create rolled back")
			}
		})
	}
}
