package crashtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Scenario is one row of the fault matrix: a server behaviour and a fault
// profile.
type Scenario struct {
	Name     string // the fault's name, "none" or "mixed"
	Behavior idemtest.Behavior
	Profile  idemtest.Profile
	// RestartAfter is how long the client stays down, by the shared
	// clock, between the faulty run and the restart that resumes.
	RestartAfter time.Duration
	// ClientOptions are added to the client's options (a test's
	// classifier, say).
	ClientOptions []idem.Option
	// ForegroundOptions are added to the options of the first process
	// only, the one that submits under the faults.
	ForegroundOptions []idem.Option
	// ResubmitAfterRestart makes the restarted process's callers submit
	// every operation again, as an application that never heard back
	// retries with the same key, with the faults still on, before the
	// faults stop and it resumes: it must know, before it sends, what
	// the process before it learnt (an endpoint that ignores the key).
	ResubmitAfterRestart bool
	// Transport, when set, wraps the transport of the client's requests
	// to the server (a gateway between them that rewrites answers, say).
	Transport func(http.RoundTripper) http.RoundTripper
}

// MatrixRate is how often a fault strikes in the single-fault rows: every
// other submit.
const MatrixRate = 0.5

// MaxSubmitsAfterFinal bounds, per key, the submits a server may see once
// its answer for the key can no longer change (a lost response is resent
// once or twice; a client that resends a stored answer in a loop is not
// correct).
const MaxSubmitsAfterFinal = 3

// The matrix's timings. The client and the server share a manual clock, so
// backoff, Retry-After, query lag and slow processing cost no real time; only
// the attempt timeout and the delay fault run on the wall clock.
const (
	matrixDelay          = 2 * time.Second        // query lag, slow processing, preempt (manual clock); delay fault (wall clock)
	matrixRetryAfter     = 2 * time.Second        // 429, 503 and the 409 of slow processing
	matrixAttemptTimeout = 200 * time.Millisecond // wall clock: cuts the delay fault short
)

// Scenarios returns the fault matrix of one server behaviour: no fault,
// each fault of the fake server alone at MatrixRate, a mixed profile with
// every fault at once, drop-then-restart (responses lost after the
// commit, and a first process that gives up after one attempt, so that the
// restarted process finds them open) and drop-then-resubmit, the same with
// the restarted process's callers submitting every operation again, the
// drops still on, before it resumes. Under a behaviour with a key window of
// its own (short-window), the client restarts twice that window later, as a
// process that was down for a while. Under an order API (client-order-id)
// the client is configured for it by BehaviorOptions, at the default retry
// settings as for every behaviour, and restarts once the default result
// lag has passed.
func Scenarios(b idemtest.Behavior) []Scenario {
	var restart time.Duration
	if b.Retention != 0 {
		restart = 2 * b.Retention
	}
	if b.KeyMember != "" {
		// An order API's "not found" may be its read path behind the
		// order placed: until idem.DefaultResultLag has passed, Resume
		// only asks about it, and a process restarted at once would
		// leave every order never placed unknown.
		restart = max(restart, idem.DefaultResultLag)
	}
	row := func(name string, p idemtest.Profile) Scenario {
		return Scenario{Name: name, Behavior: b, Profile: p, RestartAfter: restart}
	}
	sc := []Scenario{row("none", idemtest.Profile{})}
	mixed := map[idemtest.FaultKind]float64{}
	for _, k := range idemtest.FaultKinds() {
		sc = append(sc, row(string(k), profile(map[idemtest.FaultKind]float64{k: MatrixRate})))
		mixed[k] = 0.05
	}
	sc = append(sc, row("mixed", profile(mixed)))
	handOff := row("drop-then-restart", profile(map[idemtest.FaultKind]float64{idemtest.DropAfterCommit: MatrixRate}))
	handOff.ForegroundOptions = []idem.Option{idem.WithMaxAttempts(1)}
	resubmit := handOff
	resubmit.Name, resubmit.ResubmitAfterRestart = "drop-then-resubmit", true
	return append(sc, handOff, resubmit)
}

func profile(rates map[idemtest.FaultKind]float64) idemtest.Profile {
	return idemtest.Profile{Rates: rates, Delay: matrixDelay, RetryAfter: matrixRetryAfter}
}

// Row is the outcome of one Scenario. Under an order API whose key is a
// client order id (idemtest.ClientOrderID) the promises are the same:
// one order per intent, none lost, none wrongly failed or succeeded. An
// id someone else's order holds (preempt) is refused to our first
// attempt, and its order is theirs, which the result endpoint reports in
// terms no client can tell from its own: flagged for review is right,
// succeeded would be wrong. And no order of ours is sent again once it
// exists (see Refused). The states are those after the
// foreground calls and the Resumes with the faults off (RunScenario).
type Row struct {
	Scenario  string
	Behavior  string
	Ops       int
	HandedOff int // not settled when Submit returned (unknown or processing)
	Succeeded int
	Failed    int
	Unknown   int // still open after Resume, without a review reason
	Review    int // open and flagged for a person
	Attempts  int // submits and result queries the server saw
	Queries   int // result queries the server saw
	// Duplicates counts side effects beyond the first, over every key.
	Duplicates int
	// FlaggedDuplicates counts the Duplicates of operations the journal
	// flags for a person as made, or maybe made, twice (ReviewMaybeTwice,
	// ReviewMadeTwice) or sent to an endpoint that ignores the key
	// (ReviewKeyIgnored): idem told someone. Only where the server does
	// not de-duplicate (idemtest.KeyIgnored) are they no broken promise;
	// idem cannot unsend what net/http resent on its own before anything
	// said the endpoint ignores the key, nor its own resends then: with
	// the key in a header idem takes the server to replay a resend, so
	// a result endpoint's "not found" after a lost answer lets it resend
	// at once (WithResultLag holds back only a key in the body). Under
	// lost-answer-lag, a key whose every answer is lost while the
	// endpoint lags (matrixDelay, by the shared clock) before any answer
	// has said "ignored" executes once per submit (op-0000 at the cmd's
	// seed: 3 orders, flagged ReviewKeyIgnored).
	FlaggedDuplicates int
	// SilentDuplicates counts the other Duplicates: of an operation
	// settled clean, left open unflagged, or missing from the journal. A
	// broken promise under every behaviour.
	SilentDuplicates int
	// Lost counts operations missing from the journal, or left open after
	// Resume without a review reason.
	Lost int
	// ResumedAgain counts the operations the scenario's Resumes left open
	// with no review reason, each after an attempt that got no answer once
	// the faults had stopped (a machine too loaded to answer within the
	// attempt timeout), which further Resumes then settled or left to
	// check (resumeWhatTimeoutsLeft). Zero on an idle machine.
	ResumedAgain int
	// WronglyFailed counts operations marked failed although the server
	// performed them.
	WronglyFailed int
	// WronglySucceeded counts operations marked succeeded without exactly
	// one side effect of their own (someone else's order taken for ours).
	WronglySucceeded int
	// Preempted counts the keys someone else used first (the preempt
	// fault).
	Preempted int
	// Refused counts an order API's refusals of an id sent again while
	// its order existed (idemtest.ClientOrderID's -2010): resends that an
	// exchange which frees an id once its order fills would have placed.
	Refused int
	// MaxAfterFinal is the most submits one key got once the server's
	// answer for it was final; above MaxSubmitsAfterFinal it is a broken
	// promise.
	MaxAfterFinal int
	// Problems lists every broken promise found, one line each; empty when
	// all held.
	Problems []string
	Elapsed  time.Duration
}

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// RunScenario starts an in-process fake server with sc's faults, submits ops
// operations one after the other through a client journaling under dir,
// turns the faults off, restarts the client, resumes once (twice, past the
// result lag, under an order API), resumes again what only an attempt
// timeout left open (resumeWhatTimeoutsLeft), and checks every operation
// against the server's side-effect counters and request log.
func RunScenario(ctx context.Context, sc Scenario, ops int, seed int64, dir string) (Row, error) {
	start := time.Now()
	row := Row{Scenario: sc.Name, Behavior: sc.Behavior.String(), Ops: ops}
	clk := idemtest.NewClock(epoch)
	srv, err := idemtest.NewServer(idemtest.WithClock(clk.Now), idemtest.WithSeed(seed),
		idemtest.WithProfile(sc.Profile), idemtest.WithBehavior(sc.Behavior))
	if err != nil {
		return row, fmt.Errorf("%s: %w", sc.Name, err)
	}
	defer srv.Close()
	path := filepath.Join(dir, strings.ReplaceAll(row.Behavior+"-"+sc.Name, "/", "_")+".journal")
	hc := srv.Client()
	if sc.Transport != nil {
		hc = &http.Client{Transport: sc.Transport(hc.Transport)}
	}
	opts := []idem.Option{
		idem.WithHTTPClient(hc),
		idem.WithClock(clk),
		idem.WithAttemptTimeout(matrixAttemptTimeout),
		idem.WithResultEndpoint(srv.ResultTemplate()),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", Credential)
			return nil
		}),
	}
	opts = append(opts, BehaviorOptions(sc.Behavior)...)
	opts = append(opts, sc.ClientOptions...)

	c, err := idem.Open(path, append(opts[:len(opts):len(opts)], sc.ForegroundOptions...)...)
	if err != nil {
		return row, err
	}
	row.HandedOff, err = submitAll(ctx, c, sc, ops, srv.URL)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return row, err
	}

	// A restarted process resumes what was left open, once the faults
	// stop; under ResubmitAfterRestart its callers first submit every
	// operation again, faults still on.
	var faultsOff time.Time
	stopFaults := func() error {
		if err := srv.SetProfile(idemtest.Profile{}); err != nil {
			return fmt.Errorf("%s: %w", sc.Name, err)
		}
		faultsOff = clk.Now()
		return nil
	}
	if !sc.ResubmitAfterRestart {
		if err := stopFaults(); err != nil {
			return row, err
		}
	}
	clk.Advance(sc.RestartAfter)
	if c, err = idem.Open(path, opts...); err != nil {
		return row, err
	}
	if sc.ResubmitAfterRestart {
		if _, err = submitAll(ctx, c, sc, ops, srv.URL); err == nil {
			err = stopFaults()
		}
		if err != nil {
			_ = c.Close()
			return row, err
		}
	}
	_, err = c.Resume(ctx)
	if err == nil && sc.Behavior.KeyMember != "" {
		// The restarted process cannot tell how wrong the crashed one's
		// clock read, so an order its endpoint does not find is resent
		// only once the result lag has passed since the restart: Run's
		// next visit, after it.
		clk.Advance(idem.DefaultResultLag)
		_, err = c.Resume(ctx)
	}
	if err == nil {
		row.ResumedAgain, err = resumeWhatTimeoutsLeft(ctx, c, clk, sc, ops, faultsOff)
	}
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return row, err
	}

	if err := row.check(ctx, sc, path, srv); err != nil {
		return row, err
	}
	row.Elapsed = time.Since(start)
	return row, nil
}

// maxResumesAfterTimeout bounds the Resumes resumeWhatTimeoutsLeft adds.
const maxResumesAfterTimeout = 5

// resumeWhatTimeoutsLeft resumes again, at most maxResumesAfterTimeout
// times, while every operation the scenario's Resumes left open with no
// review reason had an attempt that got no answer after the faults
// stopped (faultsOff), and returns how many it found the first time.
// With the faults off, only the machine keeps an answer past the attempt
// timeout (matrixAttemptTimeout is wall clock; a loaded CI runner with
// the race detector misses it), and unknown is then idem's right answer:
// a resend cut short may have placed the order, so a "not found" within
// the result lag after it proves nothing, and a later visit settles it.
// An operation left open with no such attempt gets no further Resume:
// check counts it lost, as a server that answered every request leaves
// nothing for a later Resume to settle.
func resumeWhatTimeoutsLeft(ctx context.Context, c *idem.Client, clk *idemtest.Clock, sc Scenario, ops int, faultsOff time.Time) (int, error) {
	first := -1
	for range maxResumesAfterTimeout {
		n, err := openAfterTimeout(ctx, c, ops, faultsOff)
		if first < 0 {
			first = n
		}
		if n == 0 || err != nil {
			return first, err
		}
		if sc.Behavior.KeyMember != "" {
			clk.Advance(idem.DefaultResultLag) // past the lag since the cut-short resend
		}
		if _, err := c.Resume(ctx); err != nil {
			return first, err
		}
	}
	return first, nil
}

// openAfterTimeout returns how many of the workload's operations are open
// with no review reason, if each had an attempt since faultsOff that got
// no answer (status 0: a transport error, the attempt timeout); 0 when
// none is open so, or when one is open without such an attempt.
func openAfterTimeout(ctx context.Context, c *idem.Client, ops int, faultsOff time.Time) (int, error) {
	n := 0
	for i := range ops {
		rec, err := c.Record(ctx, idem.DefaultScope, Key(i))
		if errors.Is(err, idem.ErrNotFound) {
			continue // check reports it
		}
		if err != nil {
			return 0, err
		}
		if rec.State.Terminal() || rec.Review != "" {
			continue
		}
		if !slices.ContainsFunc(rec.Attempts, func(a journal.Attempt) bool {
			return a.Status == 0 && !a.Start.Before(faultsOff)
		}) {
			return 0, nil
		}
		n++
	}
	return n, nil
}

// submitAll submits the workload's ops operations through c, one after
// the other, and returns how many were not settled when Submit returned.
// An error is one no caller of idem expects: no result, or not an
// *idem.Error.
func submitAll(ctx context.Context, c *idem.Client, sc Scenario, ops int, url string) (int, error) {
	handedOff := 0
	for i := range ops {
		res, err := c.Submit(ctx, idem.Request{Key: Key(i), URL: url + OrdersPath, Body: Body(i)})
		var ierr *idem.Error
		switch {
		case res == nil:
			return handedOff, fmt.Errorf("%s: Submit(%s): no result: %w", sc.Name, Key(i), err)
		case err != nil && !errors.As(err, &ierr):
			return handedOff, fmt.Errorf("%s: Submit(%s): %w", sc.Name, Key(i), err)
		case !res.State.Terminal():
			handedOff++
		}
	}
	return handedOff, nil
}

// check fills in the outcome columns from the journal, read-only as the
// operator tool reads it, and from the server's counters and request log.
func (row *Row) check(ctx context.Context, sc Scenario, path string, srv *idemtest.Server) error {
	store, err := journal.Open(path, journal.ReadOnly())
	if err != nil {
		return err
	}
	defer store.Close()
	problem := func(format string, args ...any) {
		row.Problems = append(row.Problems, fmt.Sprintf(row.Scenario+": "+format, args...))
	}
	for i := range row.Ops {
		key := Key(i)
		ks := srv.KeyStats(Credential, key)
		effects := ks.Effects
		row.Duplicates += max(0, effects-1)
		row.MaxAfterFinal = max(row.MaxAfterFinal, ks.SubmitsAfterFinal)
		if ks.SubmitsAfterFinal > MaxSubmitsAfterFinal {
			problem("%s: %d submits after the server's answer was final (at most %d)", key, ks.SubmitsAfterFinal, MaxSubmitsAfterFinal)
		}
		row.Refused += ks.Refusals
		if ks.ForeignEffects > 0 {
			row.Preempted++
		} else if ks.Conflicts > 0 {
			problem("%s: the server answered %d time(s) that the key was used with another request, and no one else used it", key, ks.Conflicts)
		} else if ks.Refusals > 0 {
			// An order API holds the id for the key window here, so the
			// refusal cost nothing; an exchange that frees the id once
			// the order fills (Binance's newClientOrderId, "unique among
			// open orders") would have placed it again. A result query
			// finds every order in the matrix (one fault a request: no
			// lag hides an order whose answer was lost), so a resend of
			// an order that exists is a broken promise, not bad luck.
			problem("%s: resent %d time(s) although its order existed (refused -2010): a second order where a filled order's id is free", key, ks.Refusals)
		}
		rec, err := store.Get(ctx, idem.DefaultScope, key)
		if errors.Is(err, journal.ErrNotFound) {
			row.Lost++
			row.SilentDuplicates += max(0, effects-1)
			problem("%s: not in the journal", key)
			continue
		}
		if err != nil {
			return err
		}
		// Where the server de-duplicates nothing, a second order idem
		// flagged for a person is what idem promises there; elsewhere
		// every second order is a broken promise.
		flagged := flaggedTwice(rec.Review)
		excused := flagged && sc.Behavior.KeyIgnored
		if flagged {
			row.FlaggedDuplicates += max(0, effects-1)
		} else {
			row.SilentDuplicates += max(0, effects-1)
		}
		if rec.BodySHA != BodySHA(i) {
			problem("%s: journaled body differs from the workload's", key)
		}
		switch {
		case rec.State == journal.StateSucceeded:
			row.Succeeded++
			if effects != 1 && !(excused && effects > 1) {
				row.WronglySucceeded++
				problem("%s: succeeded with %d side effects of its own (%d of someone else's); attempts %s", key, effects, ks.ForeignEffects, DescribeAttempts(rec.Attempts))
			}
		case rec.State == journal.StateFailed:
			row.Failed++
			if effects > 0 {
				row.WronglyFailed++
				problem("%s: failed, yet the server performed it %d time(s)", key, effects)
			}
		case rec.Review != "":
			row.Review++
		default:
			row.Unknown++
			row.Lost++
			problem("%s: left %s after Resume with no review reason; attempts %s", key, rec.State, DescribeAttempts(rec.Attempts))
		}
		if effects > 1 && !excused {
			problem("%s: %d side effects (review %q); attempts %s", key, effects, rec.Review, DescribeAttempts(rec.Attempts))
		}
	}
	want := make(map[string][32]byte, row.Ops)
	for i := range row.Ops {
		want[Key(i)] = BodySHA(i)
	}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodGet {
			continue
		}
		sha, ok := want[r.Key]
		switch {
		case !ok:
			problem("server saw %s %s with key %q, not one of the workload's", r.Method, r.Path, r.Key)
		case r.Path != OrdersPath || r.Method != http.MethodPost:
			problem("%s: sent as %s %s", r.Key, r.Method, r.Path)
		case r.BodySHA256 != sha:
			problem("%s: sent with a body other than the journaled one", r.Key)
		}
	}
	st := srv.Stats()
	row.Attempts = st.Submits + st.Queries
	row.Queries = st.Queries
	if st.MaxEffectsPerKey > 1 && !sc.Behavior.KeyIgnored {
		// Under KeyIgnored the keys above judged each second order.
		problem("max_effects_per_key = %d", st.MaxEffectsPerKey)
	}
	return nil
}

// flaggedTwice reports whether a record's review reason tells a person
// the operation was, or may have been, performed more than once, or was
// sent where the key is ignored.
func flaggedTwice(review string) bool {
	switch review {
	case idem.ReviewMaybeTwice, idem.ReviewMadeTwice, idem.ReviewKeyIgnored:
		return true
	}
	return false
}

// Markdown renders rows as a Markdown table.
func Markdown(rows []Row) string {
	var b strings.Builder
	b.WriteString("| fault | ops | handed off | succeeded | failed | unknown | review | attempts | queries | preempted | refused | max after final | duplicates | flagged duplicates | silent duplicates | lost | wrongly failed | wrongly succeeded |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n",
			r.Scenario, r.Ops, r.HandedOff, r.Succeeded, r.Failed, r.Unknown, r.Review,
			r.Attempts, r.Queries, r.Preempted, r.Refused, r.MaxAfterFinal, r.Duplicates, r.FlaggedDuplicates, r.SilentDuplicates,
			r.Lost, r.WronglyFailed, r.WronglySucceeded)
	}
	return b.String()
}

// DescribeAttempts renders a record's attempts compactly, for a problem's
// message: "submit:409:wrote:refused query:200:wrote".
func DescribeAttempts(attempts []journal.Attempt) string {
	parts := make([]string, len(attempts))
	for i, a := range attempts {
		p := fmt.Sprintf("%s:%d", a.Kind, a.Status)
		for _, flag := range []struct {
			on   bool
			name string
		}{{!a.Done, "no-outcome"}, {a.Wrote, "wrote"}, {a.Resent, "resent"}, {a.Replayed, "replayed"}, {a.Refused, "refused"}} {
			if flag.on {
				p += ":" + flag.name
			}
		}
		parts[i] = p
	}
	return strings.Join(parts, " ")
}
