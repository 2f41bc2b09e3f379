package pgjournal_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// TestReplicaCrashHarness runs 3 replica processes on one PostgreSQL
// journal, each submitting its share of 1,200 operations to the fake
// server with its faults on while running Run, and SIGKILLs them at random
// (at least 30 times), restarting each on a new lease owner, as a
// rescheduled pod, except one that is never restarted. It also pauses
// replicas (SIGSTOP) past their leases, so that another replica takes
// their work over while they still live: their writes must then be
// refused (fencing). A final replica settles what is left; the verdict is
// the server's per-key side effects against the journal.
func TestReplicaCrashHarness(t *testing.T) {
	rep := runReplicaHarness(t, harnessConfig{ops: 1200, kills: 30, pauses: 6, fencing: true})
	line := fmt.Sprintf("replicas=3 kills=%d operations=%d duplicates=%d lost=%d wrongly_failed=%d stale_writes_refused=%d takeover_p50=%v takeover_max=%v",
		rep.kills, rep.operations, rep.duplicates, rep.lost, rep.wronglyFailed, rep.refused, rep.takeoverP50, rep.takeoverMax)
	fmt.Println(line)
	t.Log(line)
	require.Empty(t, rep.problems, "broken promises")
	require.GreaterOrEqual(t, rep.kills, 30, "kills")
	require.Equal(t, 1200, rep.operations, "operations in the journal")
	require.Zero(t, rep.duplicates, "duplicates")
	require.Zero(t, rep.lost, "lost")
	require.Zero(t, rep.wronglyFailed, "wrongly failed")
	require.Zero(t, rep.stale, "stale writes made")
	require.Positive(t, rep.refused, "stale writes refused: the pauses must have made some")
	require.Positive(t, rep.takeovers, "kills whose leased work another replica took over")
}

// TestReplicaCrashHarnessFencingOff proves the harness can see what fencing
// prevents: with the replicas' stores dropping the token check, a paused
// replica's writes land on records another replica has claimed since.
func TestReplicaCrashHarnessFencingOff(t *testing.T) {
	rep := runReplicaHarness(t, harnessConfig{ops: 600, kills: 3, pauses: 6, fencing: false})
	t.Logf("fencing off: stale_writes=%d duplicates=%d lost=%d wrongly_failed=%d problems=%d",
		rep.stale, rep.duplicates, rep.lost, rep.wronglyFailed, len(rep.problems))
	require.Positive(t, rep.stale, "stale writes made with fencing off")
}

type harnessConfig struct {
	ops, kills, pauses int
	fencing            bool
}

type harnessReport struct {
	kills, operations, duplicates, lost, wronglyFailed int
	refused, stale, takeovers                          int
	takeoverP50, takeoverMax                           time.Duration
	problems                                           []string
}

// slot is one replica of the deployment: a process, then its successors.
type slot struct {
	idx, life int
	lo, hi    int
	owner     string
	cmd       *exec.Cmd
	stdin     io.Closer
	exited    chan struct{}
	submitted bool // this life said every operation of its share is acked
	paused    bool
	retired   bool
}

type childLine struct {
	slot        *slot
	owner, text string
}

// pauseFor outlasts a replica's lease (its exchange plus its margin) and
// the reconcile interval, so that another replica claims its work.
const pauseFor = replicaAttempt + replicaLease + 2*replicaReconcile

func runReplicaHarness(t *testing.T, cfg harnessConfig) harnessReport {
	ctx := context.Background()
	schema := openStore(t).Schema()
	pool, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	defer pool.Close()
	srv, err := idemtest.NewServer(idemtest.WithSeed(20261201), idemtest.WithProfile(idemtest.Profile{
		Rates: map[idemtest.FaultKind]float64{
			idemtest.DropAfterCommit:   0.04,
			idemtest.ErrorAfterCommit:  0.04,
			idemtest.ErrorBeforeCommit: 0.04,
			idemtest.Unavailable:       0.03,
			idemtest.Throttle:          0.02,
			idemtest.QueryLag:          0.04,
			idemtest.SlowProcessing:    0.03,
			idemtest.GarbageBody:       0.03,
			idemtest.TruncatedBody:     0.02,
			idemtest.DelayResponse:     0.02,
			idemtest.Decline:           0.02,
		},
		Delay: 800 * time.Millisecond, RetryAfter: time.Second,
	}))
	require.NoError(t, err)
	defer srv.Close()

	rng := rand.New(rand.NewPCG(20261201, uint64(cfg.ops)))
	lines := make(chan childLine, 1024)
	var slots []*slot
	for i := range 3 {
		s := &slot{idx: i, lo: i * cfg.ops / 3, hi: (i + 1) * cfg.ops / 3}
		slots = append(slots, s)
	}
	env := func(s *slot, mode string) []string {
		e := append(os.Environ(), envReplicaMode+"="+mode, envReplicaSchema+"="+schema, envReplicaURL+"="+srv.URL,
			envReplicaOwner+"="+s.owner, fmt.Sprintf("%s=%d %d", envReplicaOps, s.lo, s.hi))
		if !cfg.fencing {
			e = append(e, envReplicaFencing+"=off")
		}
		return e
	}
	start := func(s *slot, mode string) {
		s.life++
		s.owner = fmt.Sprintf("replica-%d-life-%d", s.idx, s.life)
		s.submitted = false
		s.cmd = exec.Command(os.Args[0], "-test.run=^TestReplicaChild$")
		s.cmd.Env = env(s, mode)
		var stderr strings.Builder
		s.cmd.Stderr = &stderr
		in, err := s.cmd.StdinPipe()
		require.NoError(t, err)
		out, err := s.cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, s.cmd.Start())
		s.stdin, s.exited = in, make(chan struct{})
		go func(s *slot, owner string, cmd *exec.Cmd, exited chan struct{}) {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- childLine{s, owner, sc.Text()}
			}
			_ = cmd.Wait()
			if cmd.ProcessState != nil && !cmd.ProcessState.Success() && !signalled(cmd) {
				lines <- childLine{s, owner, fmt.Sprintf("error %s exited %v: %s", owner, cmd.ProcessState, stderr.String())}
			}
			close(exited)
		}(s, s.owner, s.cmd, s.exited)
	}
	t.Cleanup(func() {
		for _, s := range slots {
			if s.cmd != nil && s.cmd.ProcessState == nil {
				_ = s.cmd.Process.Kill()
			}
		}
	})

	rep := harnessReport{}
	acked := map[string]idem.State{}
	var childErrors []string
	account := func(l childLine) {
		f := strings.Fields(l.text)
		switch {
		case len(f) == 0:
		case f[0] == "ack" && len(f) == 3:
			acked[f[1]] = idem.State(f[2])
		case f[0] == "refused":
			rep.refused++
		case f[0] == "stale":
			rep.stale++
		case f[0] == "submitted" && l.owner == l.slot.owner:
			l.slot.submitted = true
		case f[0] == "error":
			childErrors = append(childErrors, l.text)
		}
	}

	begin := time.Now()
	for _, s := range slots {
		start(s, "work")
	}
	var takeovers []time.Duration
	takeoverDone := make(chan time.Duration, 64)
	conts := make(chan *slot, 3)
	kills, pauses, retired, measuring := 0, 0, 0, 0
	deadline := time.Now().Add(150 * time.Second)
	next := time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond)
	for {
		live := slices.DeleteFunc(slices.Clone(slots), func(s *slot) bool { return s.retired })
		// Pauses land only on replicas with drives in flight (their
		// share not yet acknowledged): once every share is, none is left
		// to make.
		done := kills >= cfg.kills
		for _, s := range live {
			done = done && s.submitted && !s.paused
		}
		if done {
			break
		}
		require.Truef(t, time.Now().Before(deadline), "kill phase still running after 150 s: %d kills", kills)
		select {
		case l := <-lines:
			account(l)
		case d := <-takeoverDone:
			takeovers = append(takeovers, d)
		case s := <-conts:
			require.NoError(t, s.cmd.Process.Signal(syscall.SIGCONT))
			s.paused = false
		case <-next:
			next = time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond)
			cands := slices.DeleteFunc(slices.Clone(live), func(s *slot) bool { return s.paused })
			if len(cands) == 0 {
				continue
			}
			s := cands[rng.IntN(len(cands))]
			if pauses < cfg.pauses && !s.submitted && rng.IntN(3) == 0 {
				// Paused with its drives in flight: its leases expire
				// and other replicas take its work over.
				require.NoError(t, s.cmd.Process.Signal(syscall.SIGSTOP))
				s.paused = true
				pauses++
				time.AfterFunc(pauseFor, func() { conts <- s })
				continue
			}
			if kills >= cfg.kills {
				continue
			}
			held := leasedBy(t, pool, schema, s.owner)
			killedAt := time.Now()
			require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
			<-s.exited
			kills++
			if len(held) > 0 {
				measuring++
				go func(owner string) { takeoverDone <- awaitTakeover(pool, schema, owner, held, killedAt) }(s.owner)
			}
			// One replica is never restarted: the others' Run must take
			// its leftovers over, and the final replica submits what it
			// never did.
			if retired == 0 && kills >= cfg.kills*2/3 {
				s.retired = true
				retired++
				continue
			}
			start(s, "work")
		}
	}
	killPhase := time.Since(begin)
	// The survivors stop cleanly; a final replica, on a new identity,
	// submits what nobody submitted and settles what is left open.
	for _, s := range slots {
		if !s.retired {
			_ = s.stdin.Close()
		}
	}
	for _, s := range slots {
		if s.retired {
			continue
		}
		drain(t, lines, s.exited, account)
	}
	final := &slot{idx: 9, lo: 0, hi: cfg.ops}
	start(final, "settle")
	drain(t, lines, final.exited, account)
	for len(takeovers) < measuring {
		takeovers = append(takeovers, <-takeoverDone) // each within its minute
	}

	rep.kills = kills
	rep.problems = append(rep.problems, childErrors...)
	checkVerdict(t, ctx, schema, srv, cfg.ops, acked, &rep)
	rep.takeovers = len(takeovers)
	if len(takeovers) > 0 {
		slices.Sort(takeovers)
		rep.takeoverP50 = takeovers[len(takeovers)/2].Round(time.Millisecond)
		rep.takeoverMax = takeovers[len(takeovers)-1].Round(time.Millisecond)
	}
	t.Logf("pauses=%d retired=%d takeovers=%d acked=%d kill_phase=%v total=%v server=%+v", pauses, retired, len(takeovers), len(acked),
		killPhase.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), srv.Stats())
	return rep
}

// drain accounts for a child's lines until it has exited, within a bound.
func drain(t *testing.T, lines <-chan childLine, exited <-chan struct{}, account func(childLine)) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l := <-lines:
			account(l)
		case <-exited:
			for {
				select {
				case l := <-lines:
					account(l)
				default:
					return
				}
			}
		case <-timeout:
			t.Fatal("a replica still running 2 min after it was told to stop")
		}
	}
}

func signalled(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// leasedBy lists the open records owner holds a live lease on.
func leasedBy(t *testing.T, pool *pgxpool.Pool, schema, owner string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT key FROM `+schema+`.records
		WHERE open AND lease_owner = $1 AND lease_expires > $2`, owner, time.Now().UnixNano())
	require.NoError(t, err)
	var keys []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	return keys
}

// awaitTakeover polls until no open record of keys is leased by owner any
// more (another replica claimed each; one owner settled before the kill
// landed needs no taking over) and returns how long after killedAt that
// was; it gives up after 60 s and returns the time waited.
func awaitTakeover(pool *pgxpool.Pool, schema, owner string, keys []string, killedAt time.Time) time.Duration {
	for time.Since(killedAt) < time.Minute {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+schema+`.records
			WHERE key = ANY($1) AND lease_owner = $2 AND open`, keys, owner).Scan(&n)
		if err == nil && n == 0 {
			return time.Since(killedAt)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval, bounded above
	}
	return time.Since(killedAt)
}

// checkVerdict compares the journal with the server's side effects.
func checkVerdict(t *testing.T, ctx context.Context, schema string, srv *idemtest.Server, ops int, acked map[string]idem.State, rep *harnessReport) {
	t.Helper()
	st, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(schema))
	require.NoError(t, err)
	defer st.Close()
	recs := map[string]*journal.Record{}
	for i := range ops {
		key := replicaKey(i)
		rec, err := st.Get(ctx, idem.DefaultScope, key)
		if errors.Is(err, journal.ErrNotFound) {
			continue
		}
		require.NoError(t, err)
		recs[key] = rec
	}
	rep.operations = len(recs)
	// Write-ahead: every request the server received was for a journaled
	// operation, with its journaled bytes.
	for _, r := range srv.Requests() {
		rec := recs[r.Key]
		switch {
		case rec == nil:
			rep.problems = append(rep.problems, fmt.Sprintf("%s %s %s: a request for an operation not journaled", r.Method, r.Path, r.Key))
		case r.Method == http.MethodPost && r.BodySHA256 != rec.BodySHA:
			rep.problems = append(rep.problems, fmt.Sprintf("%s: a submit with other bytes than journaled", r.Key))
		}
	}
	for i := range ops {
		key := replicaKey(i)
		effects := srv.Effects("", key)
		rep.duplicates += max(0, effects-1)
		rec := recs[key]
		switch {
		case rec == nil:
			rep.lost++
			rep.problems = append(rep.problems, key+": not in the journal")
			continue
		case rec.BodySHA != sha256.Sum256(replicaBody(i)):
			rep.problems = append(rep.problems, key+": journaled with other bytes")
		}
		switch {
		case rec.State == journal.StateSucceeded && effects != 1:
			rep.problems = append(rep.problems, fmt.Sprintf("%s: succeeded with %d side effects", key, effects))
		case rec.State == journal.StateFailed && effects > 0:
			rep.wronglyFailed++
			rep.problems = append(rep.problems, fmt.Sprintf("%s: failed; the server performed it %d time(s)", key, effects))
		case rec.Open() && rec.Review == "":
			rep.lost++
			rep.problems = append(rep.problems, fmt.Sprintf("%s: left %s after the final replica", key, rec.State))
		}
		if s, ok := acked[key]; ok && s.Terminal() && rec.State != s {
			rep.problems = append(rep.problems, fmt.Sprintf("%s: acknowledged as %s, now %s", key, s, rec.State))
		}
	}
}
