package crashtest_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/internal/fakeserver"
	"github.com/idemkit/idem/journal"
)

// TestCrashHarness runs the real client in child processes against the
// idem-fakeserver command and kills them, under each server behaviour:
// first at fixed crash points, one subtest each, then at random moments,
// 100 kills in all over a workload of 1,200 operations with the server's
// faults on, split evenly across the behaviours (key-ignored included:
// there a second order the journal flags for review passes, an unflagged
// one fails). The server process
// outlives every child, so it remembers keys across client restarts, as a
// real API does. The clients run with the default retry budget. -short
// shrinks the random part; nothing skips it.
//
// The random kills are seeded: IDEM_CRASHTEST_SEED=n repeats a run's kill
// schedule and the server's faults (their timing, and so the exact
// interleaving, still varies).
func TestCrashHarness(t *testing.T) {
	bin := buildServer(t)
	for _, hb := range harnessBehaviors() {
		t.Run(hb.name, func(t *testing.T) {
			t.Run("points", func(t *testing.T) { testCrashPoints(t, bin, hb) })
			t.Run("random_kills", func(t *testing.T) { testRandomKills(t, bin, hb) })
		})
	}
}

// harnessBehavior is a server behaviour as the harness runs it.
type harnessBehavior struct {
	name string
	args []string // the server's flags
	// keyWindow is the server's key window, when it is short enough to
	// pass during a run; the clients are told it, less a margin for the
	// time a request takes to arrive.
	keyWindow time.Duration
	// keyIgnored: the server executes every submit (fakeserver.KeyIgnored),
	// so a second order the journal flags for review breaks no promise; one
	// it does not flag does.
	keyIgnored bool
}

// harnessKeyWindow is short-window's key window in the harness: the
// preset's 30 minutes would not pass during a run, so it is scaled down to
// a few seconds, and so is what the clients are told.
const harnessKeyWindow = 6 * time.Second

func harnessBehaviors() []harnessBehavior {
	var out []harnessBehavior
	for _, b := range fakeserver.Behaviors() {
		hb := harnessBehavior{name: b.Name, args: []string{"-behavior", b.Name}}
		// An order API's clients are configured as the README says for
		// it, with the default retry budget: what counts as correct is
		// what it is for every behaviour, one order per intent, and a
		// key conflict only where someone else used the id (preempt,
		// which the random kills leave out).
		if b.Retention != 0 {
			hb.args = []string{"-retention", harnessKeyWindow.String()}
			hb.keyWindow = harnessKeyWindow
		}
		out = append(out, hb)
	}
	// Not a preset of Behaviors: a second order there is allowed when the
	// journal flags it for a person (keyIgnored).
	ki := fakeserver.KeyIgnored()
	return append(out, harnessBehavior{name: ki.Name, args: []string{"-key-ignored"}, keyIgnored: true})
}

// env returns the children's environment for a journal and a server.
func (hb harnessBehavior) env(path, url string) []string {
	env := []string{envJournal + "=" + path, envURL + "=" + url, envBehavior + "=" + hb.name}
	if hb.keyWindow > 0 {
		env = append(env, envKeyWindow+"="+(hb.keyWindow-2*time.Second).String())
	}
	return env
}

// harnessAfterFinal bounds the submits one key gets once the server's
// answer for it is final. It is higher than the matrix's bound: a child
// killed after a submit and before it committed the outcome resends on
// restart.
const harnessAfterFinal = 6

// testCrashPoints kills a child at each boundary of an operation's life,
// then restarts a clean child that resumes, and checks the operation: one
// side effect, settled in the journal, the same key and bytes on every
// request.
func testCrashPoints(t *testing.T, bin string, hb harnessBehavior) {
	key := crashtest.Key(0)
	sha := crashtest.BodySHA(0)
	wantSHA := hex.EncodeToString(sha[:])
	points := []struct {
		name, point string
		// fault is scripted on the server before the child starts.
		fault *fakeserver.Fault
		// before checks the server's counters and the journal record
		// after the crash, before the resume.
		before func(t *testing.T, st fakeserver.Stats, rec *journal.Record)
		// resubmit makes the clean child Submit the key again after
		// Resume, as a restarted application that never heard back would.
		resubmit bool
	}{{
		name: "a_journaled_not_sent", point: "a",
		before: func(t *testing.T, st fakeserver.Stats, rec *journal.Record) {
			require.Zero(t, st.Requests, "requests the server saw")
			require.Zero(t, st.SideEffects, "side effects before the resume")
			require.Equal(t, journal.StatePending, rec.State, "state")
			require.Len(t, rec.Attempts, 1, "attempts journaled")
			require.False(t, rec.Attempts[0].Done, "the attempt has no outcome")
		},
	}, {
		name: "b_sent_outcome_not_committed", point: "b",
		before: func(t *testing.T, st fakeserver.Stats, rec *journal.Record) {
			require.Equal(t, 1, st.Submits, "submits")
			require.Equal(t, 1, st.SideEffects, "side effects")
			require.True(t, rec.Open(), "the record is open: the outcome was not committed; state %s", rec.State)
			require.Len(t, rec.Attempts, 1, "attempts journaled")
			require.False(t, rec.Attempts[0].Done, "the attempt has no outcome")
		},
	}, {
		name: "c_queried_result_not_committed", point: "c",
		// The submit's answer is a 500 although the server performed
		// it, so the client asks the result endpoint.
		fault: &fakeserver.Fault{Kind: fakeserver.ErrorAfterCommit, Key: key},
		before: func(t *testing.T, st fakeserver.Stats, rec *journal.Record) {
			require.Equal(t, 1, st.Submits, "submits")
			require.Equal(t, 1, st.Queries, "queries")
			require.Equal(t, 1, st.SideEffects, "side effects")
			require.True(t, rec.Open(), "the record is open: the query's answer was not committed; state %s", rec.State)
			require.Len(t, rec.Attempts, 1, "attempts journaled: the submit only")
			require.True(t, rec.Attempts[0].Done, "the submit's outcome is committed")
			require.Equal(t, http.StatusInternalServerError, rec.Attempts[0].Status, "the submit's status")
		},
	}, {
		name: "d_committed_not_returned", point: "d", resubmit: true,
		before: func(t *testing.T, st fakeserver.Stats, rec *journal.Record) {
			require.Equal(t, 1, st.Submits, "submits")
			require.Equal(t, 1, st.SideEffects, "side effects")
			require.Equal(t, journal.StateSucceeded, rec.State, "state committed before the crash")
		},
	}}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, bin, hb.args...)
			if p.fault != nil {
				srv.inject(t, *p.fault)
			}
			path := filepath.Join(t.TempDir(), "idem.journal")
			env := hb.env(path, srv.URL)

			var lines []string
			ch := startChild(t, append(env, envMode+"=point", envPoint+"="+p.point, envKey+"="+key)...)
			ch.wait(t, time.Minute, func(l string) { lines = append(lines, l) })
			require.Truef(t, ch.killed(), "child died of SIGKILL; exit %v; lines %q; stderr:\n%s", ch.err, lines, ch.stderr)
			require.Contains(t, lines, "crash "+p.point+" "+key, "the child crashed at its point")
			require.Contains(t, lines, "journaled "+key, "Create returned before the crash")

			before := srv.stats(t)
			rec := readJournal(t, path)[key]
			require.NotNil(t, rec, "the operation is in the journal after the crash")
			p.before(t, before, rec)
			if rec.Open() {
				// A clean process resumes it once the result lag has passed
				// since the crashed one's last send: before, an order the
				// result endpoint does not find (one never sent, point a)
				// is only asked about, not resent, with the key in the body.
				last := rec.Attempts[len(rec.Attempts)-1].Start
				time.Sleep(time.Until(last.Add(attemptTimeout + resultLag)))
			}

			// A clean process resumes it.
			ch = startChild(t, append(env, envMode+"=work", envOps+"=1", envResubmit+"="+map[bool]string{true: "1"}[p.resubmit])...)
			var resumed string
			ch.wait(t, time.Minute, func(l string) {
				lines = append(lines, l)
				if strings.HasPrefix(l, "resumed ") {
					resumed = l
				}
			})
			ch.requireClean(t)
			require.Contains(t, lines, "done")
			after := srv.stats(t)

			rec = readJournal(t, path)[key]
			require.Equal(t, journal.StateSucceeded, rec.State, "state after the resume")
			if hb.keyIgnored && p.point == "a" {
				// The crashed attempt may have gone out, for all the
				// restarted process knows, and the endpoint executes
				// every copy: the resend that placed the order settles
				// it, flagged (one order here, by the server's count).
				require.Equal(t, idem.ReviewMaybeTwice, rec.Review, "review reason")
			} else {
				require.Empty(t, rec.Review, "review reason")
			}
			require.Equal(t, 1, after.SideEffects, "side effects for %s", key)
			require.Equal(t, 1, after.MaxEffectsPerKey, "max_effects_per_key")
			require.Zero(t, after.Conflicts, "422s: a request with the key and other bytes")
			require.Zero(t, after.MaxSubmitsAfterFinal, "submits after the server's answer was final")
			switch {
			case p.point == "d":
				require.Equal(t, "resumed visited=0 open=0", resumed, "nothing left open after a committed outcome")
				require.Equal(t, before.Submits+before.Queries, after.Submits+after.Queries,
					"requests for a settled operation after the restart")
			case hb.keyIgnored && p.point == "a":
				require.Equal(t, "resumed visited=1 open=1", resumed, "Resume settled the operation, flagged (counted with the open)")
			default:
				require.Equal(t, "resumed visited=1 open=0", resumed, "Resume settled the operation")
			}

			// Every request for the key carried it, its journaled bytes and
			// its URL.
			n := 0
			for _, l := range lines {
				f := strings.Fields(l)
				if len(f) != 5 || f[0] != "sent" || f[2] != key {
					continue
				}
				n++
				if f[1] == http.MethodGet {
					require.Equal(t, "/operations/"+key, f[4], l)
				} else {
					require.Equal(t, []string{http.MethodPost, wantSHA, crashtest.OrdersPath}, []string{f[1], f[3], f[4]}, l)
				}
			}
			require.NotZero(t, n, "requests logged for %s", key)
			srvOp := srv.operation(t, key)
			require.Equal(t, "succeeded", srvOp.State, "the server's state")
			require.Equal(t, srvOp.ResourceID, rec.Result.ResourceID, "the journal holds the server's resource id")
			t.Logf("%s: before resume %+v; after %+v; %d requests for the key", p.name, before, after, n)
		})
	}
}

// ledger is the parent's account of what the children said.
type ledger struct {
	acked    map[string]journal.State // Submit returned with the key journaled
	inflight map[string]bool          // begun and not acknowledged by the current child
	sent     int                      // requests handed to the transport
	posts    map[string]int           // submits handed to the transport, by key
	bad      []string                 // requests with other bytes or another URL than the journaled ones
	errors   []string                 // "error" lines
	// conflicts holds the keys Submit reported used with another request.
	conflicts map[string]bool
}

// line accounts for one line of a child and returns its first word.
func (l *ledger) line(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	switch {
	case f[0] == "begin" && len(f) == 2:
		l.inflight[f[1]] = true
	case f[0] == "conflict" && len(f) == 2:
		l.conflicts[f[1]] = true
	case f[0] == "ack" && len(f) == 3:
		delete(l.inflight, f[1])
		l.acked[f[1]] = journal.State(f[2])
	case f[0] == "sent" && len(f) == 5:
		l.sent++
		if f[1] != http.MethodGet {
			l.posts[f[2]]++
		}
		i := keyIndex(f[2])
		switch {
		case l.acked[f[2]].Terminal():
			l.bad = append(l.bad, s+": a request after the caller was told the operation "+string(l.acked[f[2]]))
		case i < 0:
			l.bad = append(l.bad, s+": not a workload key")
		case f[1] == http.MethodGet:
			if f[4] != "/operations/"+f[2] {
				l.bad = append(l.bad, s+": query of another key")
			}
		case f[1] != http.MethodPost || f[4] != crashtest.OrdersPath:
			l.bad = append(l.bad, s+": another method or URL than journaled")
		case f[3] != bodyHex(i):
			l.bad = append(l.bad, s+": another body than journaled")
		}
	case f[0] == "error":
		l.errors = append(l.errors, s)
	}
	return f[0]
}

// killPlan says when to kill one child: delay after the count-th line
// starting with after.
type killPlan struct {
	after string
	count int
	delay time.Duration
}

// testRandomKills is the random part of the harness.
func testRandomKills(t *testing.T, bin string, hb harnessBehavior) {
	ops, wantKills := 1200, 100
	if testing.Short() {
		ops, wantKills = 300, 30
	}
	// The kills and the workload are shared among the behaviours, so that
	// the harness takes as long as with one.
	n := len(harnessBehaviors())
	ops, wantKills = ops/n, wantKills/n
	seed := uint64(20261129)
	if v := os.Getenv("IDEM_CRASHTEST_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "IDEM_CRASHTEST_SEED")
	}
	t.Logf("seed %d (set IDEM_CRASHTEST_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	start := time.Now()

	srv := startServer(t, bin, append(hb.args, "-seed", strconv.FormatUint(seed, 10),
		"-delay", serverDelay.String(), "-retry-after", "1s",
		"-drop-after-commit", "0.04",
		"-error-after-commit", "0.04",
		"-error-before-commit", "0.04",
		"-unavailable", "0.03",
		"-throttle", "0.02",
		"-query-lag", "0.05",
		"-slow-processing", "0.04",
		"-garbage-body", "0.04",
		"-truncated-body", "0.02",
		"-delay-response", "0.01",
		"-decline", "0.02",
		"-reject-409", "0.02",
		// No preempt fault here: a kill between a submit that got 409
		// (someone else holds the key) and the journaling of that answer
		// leaves an attempt that may have executed, and the result
		// endpoint, keyed by the key alone, then reports the other
		// request's order in terms no client can tell from its own. The
		// fault matrix and the outcome-table tests drive it without kills.
	)...)
	path := filepath.Join(t.TempDir(), "idem.journal")
	env := hb.env(path, srv.URL)
	led := &ledger{acked: map[string]journal.State{}, inflight: map[string]bool{}, posts: map[string]int{}, conflicts: map[string]bool{}}

	// Life n works on operations 0..(n+1)*step-1, so the workload
	// advances by about step operations a life, plus what the last child
	// left open; the kill plan lands most kills while Submits are in
	// flight and some during start-up and Resume. The workload lasts
	// half as many lives again as there are kills to make: a fast child
	// may finish its share before its kill lands, and that life counts
	// none.
	step := max(1, 2*ops/(3*wantKills))
	kills, midOp, inResume, lives := 0, 0, 0, 0
	phaseDeadline := time.Now().Add(150 * time.Second)
	for kills < wantKills {
		require.Lessf(t, lives, 4*wantKills, "lives without reaching %d kills (%d so far)", wantKills, kills)
		require.Truef(t, time.Now().Before(phaseDeadline), "%d kills after %v; want %d", kills, time.Since(start), wantKills)
		plan := killPlan{after: "begin", count: 1 + rng.IntN(step), delay: time.Duration(rng.IntN(10_000)) * time.Microsecond}
		switch r := rng.IntN(10); {
		case r < 2:
			plan = killPlan{after: "opened", count: 1, delay: time.Duration(rng.IntN(80_000)) * time.Microsecond}
		case r < 4:
			plan.delay = time.Duration(rng.IntN(300_000)) * time.Microsecond
		}
		hi := min(ops, (lives+1)*step)
		if lives*step >= ops {
			// Every operation has been started: only start-up and Resume
			// are left to interrupt, and they are short.
			plan = killPlan{after: "opened", count: 1}
		}
		killed, resumed := runLife(t, led, plan, append(env, envMode+"=work", envOps+"="+strconv.Itoa(hi))...)
		lives++
		if killed {
			kills++
			if len(led.inflight) > 0 {
				midOp++
			}
			if !resumed {
				inResume++
			}
		}
		clear(led.inflight)
	}
	killPhase := time.Since(start)

	// No more kills: a child finishes the workload, then one only resumes.
	ch := startChild(t, append(env, envMode+"=work", envOps+"="+strconv.Itoa(ops))...)
	ch.wait(t, 2*time.Minute, func(l string) { led.line(l) })
	ch.requireClean(t)
	require.Empty(t, led.errors, "errors reported by the children")
	var final string
	ch = startChild(t, append(env, envMode+"=resume")...)
	ch.wait(t, 2*time.Minute, func(l string) {
		if led.line(l) == "open" {
			final = l
		}
	})
	ch.requireClean(t)
	require.Empty(t, led.errors, "errors reported by the children")
	require.NotEmpty(t, final, "the resume child's summary")

	// The verdict: the journal, read as the operator tool reads it, against
	// the server's side effects.
	checkBolt(t, path)
	recs := readJournal(t, path)
	st := srv.stats(t) // before our own queries below add to it
	var duplicates, flaggedDuplicates, silentDuplicates, lost, wronglyFailed, wronglySucceeded, unknown, review, maxAfterFinal int
	var problems []string
	for i := range ops {
		key := crashtest.Key(i)
		ks := srv.keyStats(t, key)
		duplicates += max(0, ks.Effects-1)
		maxAfterFinal = max(maxAfterFinal, ks.SubmitsAfterFinal)
		if ks.SubmitsAfterFinal > harnessAfterFinal {
			problems = append(problems, fmt.Sprintf("%s: %d submits after the server's answer was final (at most %d)", key, ks.SubmitsAfterFinal, harnessAfterFinal))
		}
		if (ks.Conflicts > 0 || led.conflicts[key]) && ks.ForeignEffects == 0 {
			problems = append(problems, fmt.Sprintf("%s: a key conflict (%d from the server), and no one else used the key; attempts %s", key, ks.Conflicts, describe(recs, key)))
		}
		rec := recs[key]
		if rec == nil {
			lost++
			silentDuplicates += max(0, ks.Effects-1)
			problems = append(problems, key+": not in the journal")
			continue
		}
		flagged := rec.Review == idem.ReviewMaybeTwice || rec.Review == idem.ReviewMadeTwice || rec.Review == idem.ReviewKeyIgnored
		excused := flagged && hb.keyIgnored
		if flagged {
			flaggedDuplicates += max(0, ks.Effects-1)
		} else {
			silentDuplicates += max(0, ks.Effects-1)
		}
		if ks.Effects > 1 && !excused {
			problems = append(problems, fmt.Sprintf("%s: %d side effects (review %q); attempts %s", key, ks.Effects, rec.Review, crashtest.DescribeAttempts(rec.Attempts)))
		}
		if rec.BodySHA != crashtest.BodySHA(i) || rec.URL != srv.URL+crashtest.OrdersPath {
			problems = append(problems, key+": journaled with other bytes or another URL")
		}
		// Write-ahead: every submit that went out had its attempt
		// journaled first (checked while the history is not compacted).
		if n := len(rec.Attempts); n > 0 && rec.Attempts[n-1].Number == n {
			submits := 0
			for _, a := range rec.Attempts {
				if a.Kind == journal.AttemptSubmit {
					submits++
				}
			}
			if submits < led.posts[key] {
				problems = append(problems, fmt.Sprintf("%s: %d submits sent, %d journaled", key, led.posts[key], submits))
			}
		}
		switch {
		case rec.State == journal.StateSucceeded:
			if ks.Effects != 1 && !(excused && ks.Effects > 1) {
				wronglySucceeded++
				problems = append(problems, fmt.Sprintf("%s: succeeded as %s with %d side effects of its own (%d of someone else's); attempts %s",
					key, rec.Result.ResourceID, ks.Effects, ks.ForeignEffects, crashtest.DescribeAttempts(rec.Attempts)))
			} else if op := awaitServerView(t, srv, key, rec, hb); op.Status == http.StatusOK && op.ResourceID != rec.Result.ResourceID && ks.Effects == 1 {
				// A key past a short window answers 404: only its count
				// of side effects speaks for it.
				problems = append(problems, fmt.Sprintf("%s: succeeded as %s; the server says %+v", key, rec.Result.ResourceID, op))
			}
		case rec.State == journal.StateFailed:
			if ks.Effects > 0 {
				wronglyFailed++
				problems = append(problems, fmt.Sprintf("%s: failed; the server performed it %d time(s)", key, ks.Effects))
			}
		case rec.Review != "":
			review++
		default:
			unknown++
			lost++
			problems = append(problems, fmt.Sprintf("%s: left %s after the final resume with no review reason; attempts %s", key, rec.State, describe(recs, key)))
		}
	}
	for key, state := range led.acked {
		switch rec := recs[key]; {
		case keyIndex(key) < 0 || keyIndex(key) >= ops:
			problems = append(problems, key+": acknowledged, not in the workload")
		case rec == nil:
			// Counted as lost above.
		case state.Terminal() && rec.State != state:
			problems = append(problems, fmt.Sprintf("%s: acknowledged as %s, now %s", key, state, rec.State))
		}
	}
	if st.MaxEffectsPerKey > 1 && !hb.keyIgnored { // there, judged per key above
		problems = append(problems, fmt.Sprintf("max_effects_per_key = %d", st.MaxEffectsPerKey))
	}
	problems = append(problems, led.bad...)

	figures := fmt.Sprintf("behavior=%s kills=%d operations=%d duplicates=%d flagged_duplicates=%d silent_duplicates=%d lost=%d wrongly_failed=%d wrongly_succeeded=%d unknown=%d review=%d max_after_final=%d",
		hb.name, kills, len(recs), duplicates, flaggedDuplicates, silentDuplicates, lost, wronglyFailed, wronglySucceeded, unknown, review, maxAfterFinal)
	t.Log(figures)
	fmt.Println(figures)
	t.Logf("seed=%d lives=%d kills_mid_submit=%d kills_before_resume_returned=%d acked=%d requests_sent=%d final_resume=%q kill_phase=%v total=%v",
		seed, lives, midOp, inResume, len(led.acked), led.sent, final, killPhase.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Logf("server: %+v", st)

	require.Empty(t, problems, "broken promises")
	require.GreaterOrEqual(t, kills, wantKills, "kills")
	require.Equal(t, ops, len(recs), "operations in the journal")
	require.Zero(t, silentDuplicates, "silent duplicates")
	if !hb.keyIgnored {
		require.Zero(t, duplicates, "duplicates")
	}
	require.Zero(t, lost, "lost")
	require.Zero(t, wronglyFailed, "wrongly failed")
	require.Zero(t, wronglySucceeded, "wrongly succeeded")
	require.LessOrEqual(t, maxAfterFinal, harnessAfterFinal, "submits of one key after its answer was final")
	require.Positive(t, midOp, "kills that landed with a Submit in flight")
}

// runLife runs one child until plan kills it or it finishes. It reports
// whether it was killed, and whether the child's Resume had returned by then.
func runLife(t *testing.T, led *ledger, plan killPlan, env ...string) (killed, resumed bool) {
	t.Helper()
	ch := startChild(t, env...)
	seen := 0
	var fire <-chan time.Time // nil until the plan's line is seen
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	signalled := false
	for {
		select {
		case line, ok := <-ch.lines:
			if !ok {
				<-ch.exited
				require.Emptyf(t, led.errors, "child errors; stderr:\n%s", ch.stderr)
				if signalled && ch.killed() {
					return true, resumed
				}
				ch.requireClean(t) // it finished before the kill
				return false, resumed
			}
			word := led.line(line)
			if word == "resumed" {
				resumed = true
			}
			if word == plan.after && fire == nil && !signalled {
				if seen++; seen >= plan.count {
					fire = time.After(plan.delay)
				}
			}
		case <-fire:
			// Keep reading: the lines the child wrote before it died
			// still count.
			err := ch.cmd.Process.Signal(syscall.SIGKILL)
			fire = nil
			if errors.Is(err, os.ErrProcessDone) {
				continue // it finished before the kill: judged clean when its output ends
			}
			require.NoError(t, err)
			signalled = true
		case <-deadline.C:
			ch.kill()
			t.Fatalf("child still running after 2 min; stderr:\n%s", ch.stderr)
		}
	}
}

// awaitServerView asks the server about key. The query-lag fault makes the
// result endpoint answer 404 for a while after a commit, so an operation the
// journal holds as performed is asked again until the lag has passed;
// unless the key window is short, when a 404 may mean the key is gone.
func awaitServerView(t *testing.T, srv *serverProc, key string, rec *journal.Record, hb harnessBehavior) serverOp {
	t.Helper()
	op := srv.operation(t, key)
	if op.Status != http.StatusNotFound || rec.State != idem.StateSucceeded || hb.keyWindow > 0 {
		return op
	}
	deadline := time.Now().Add(5 * serverDelay)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for op.Status == http.StatusNotFound && time.Now().Before(deadline) {
		<-tick.C
		op = srv.operation(t, key)
	}
	return op
}

func bodyHex(i int) string {
	sha := crashtest.BodySHA(i)
	return hex.EncodeToString(sha[:])
}

// describe names the journaled attempts of key, for a problem report.
func describe(recs map[string]*journal.Record, key string) string {
	if r, ok := recs[key]; ok {
		return crashtest.DescribeAttempts(r.Attempts) + " review " + r.Review
	}
	return "(not journaled)"
}
