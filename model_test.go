package idem_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// The model-based test: seeded, randomized histories of a client talking
// to a simulated Idempotency-Key server (model_server_test.go) that answers
// as real servers do (replays, 409 in flight, 422 or 417 for another body,
// stored errors, silent replays, short key windows) under faults (lost
// responses, 500 before and after commit, throttling, slow processing,
// result-endpoint lag, garbage bodies, a foreign request on the same key),
// while the client's process crashes at random points and restarts on the
// surviving journal. After each history the invariants of DESIGN.md are
// checked: one side effect per intent, never a wrong "succeeded" or
// "failed", no resend once the server's answer is final or the key window
// has passed, nothing left stuck.
//
// A failing history prints its seed; replay it with
//
//	go test -run 'TestModel$' -model.seed=N -v
//
// which prints the whole history. -model.n=100000 runs a longer search.
// Histories are deterministic but for the client's own jitter (backoff
// and reconciler spacing draw from math/rand), which can shift when a
// visit lands; the printed history shows what happened.

var (
	modelSeed  = flag.Uint64("model.seed", 1, "first history seed of TestModel; alone it runs that one history")
	modelN     = flag.Int("model.n", 10000, "number of histories TestModel runs")
	modelStore = flag.String("model.store", "mem", "journal under TestModel: mem (in-memory Store) or bbolt (journal without fsync)")
	modelShow  = flag.Int("model.show", 1, "failing histories TestModel prints in full (the next ones up to 20 by seed)")
)

// Limits that keep every history bounded whatever the client does.
const (
	maxRequestsPerHistory = 4000
	maxSleepsPerHistory   = 200000
	// finalLifeSpan is how long the last life's reconciler runs: past the
	// client's reconciliation deadline (72 h) and every key window, so
	// each operation has either settled or been flagged by then.
	finalLifeSpan = 75 * time.Hour
	modelScope    = "default"
	modelURL      = "http://127.0.0.1:1/v1/orders"
	modelQuery    = "/v1/ops/{key}"
)

var modelEpoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

var (
	errCrashed = errors.New("model: the process crashed")
	errRunOver = errors.New("model: the reconciler's time is up")
	errRunaway = errors.New("model: history ran past its bounds")
)

// Violation kinds: each names an invariant.
const (
	vDuplicate       = "duplicate side effect"
	vWrongSuccess    = "succeeded without an effect of this request"
	vWrongSuccessID  = "succeeded with another request's resource"
	vWrongFailure    = "failed though this request made an effect"
	vStuck           = "open and not flagged for review at the end"
	vStuckDeadline   = "left to the reconciliation deadline"
	vResendFinal     = "resent after the server's answer was final"
	vResendWindow    = "resent after the key window"
	vAfterTerminal   = "request after the journal said terminal"
	vChangedRequest  = "request changed between attempts"
	vNotJournaled    = "sent before the attempt was journaled"
	vCallerOutcome   = "caller told an outcome the journal does not hold"
	vUnexpectedError = "unexpected error"
	vRunaway         = "history ran past its bounds"
	vWrongReview     = "flagged as another request's key though none used it"
	vProbe           = "clock probe with a key or body, or more than one a life"
)

// crashKind is where a life's process dies.
type crashKind int

const (
	crashNone         crashKind = iota
	crashWriteFails             // the n-th journal write fails: it never committed
	crashWriteCommits           // the n-th journal write commits, then the process dies
	crashBeforeSend             // the n-th request never leaves: the process died first
	crashAfterServer            // the server executes the n-th request, then the process dies
)

func (k crashKind) String() string {
	return [...]string{"no crash", "journal write fails", "journal write commits, then dies",
		"dies before sending", "dies after the server executed"}[k]
}

type lifePlan struct {
	crash  crashKind
	n      int           // which write or request (from 1, in this life)
	offset time.Duration // client clock minus true time
	runFor time.Duration // how long Run goes on (every life but the last)
	heal   time.Duration // last life: faults stop this long after it starts
	redo   float64       // share of unanswered intents the application sends again
	// concurrent: the reconciler runs while the application calls, as in
	// a service, one pass of it alongside each call; else it runs after.
	concurrent bool
}

// foreignPlan is another request with the same key and another body.
type foreignPlan struct {
	body     []byte
	inflight time.Duration // 0: done before ours arrives; else still in flight for this long
	handler  handlerPlan
	applied  bool
	resID    string
}

// modelOp is one business intent of ours, and what the model saw of it.
type modelOp struct {
	idx        int
	key        string
	body       []byte
	viaPrepare bool
	handler    handlerPlan
	foreign    *foreignPlan
	rng        *rand.Rand // this key's faults, in the order of its requests

	// Observations, under history.mu.
	effects     []string // resources our executions created
	execs       int
	submits     int
	queries     int
	finals      int       // final answers delivered intact
	finalLife   int       // life of the first of them
	firstMaybe  time.Time // true time of the first submit that may have executed
	terminalSeq int64     // event number of the commit that made it terminal
	lastState   journal.State
	lastReview  string
	appFinal    bool // the application was told a final outcome
	// lastRefused: the last submit's answer said it did not execute (409,
	// 429, …). A server that answers nothing else (a stored handler 409
	// whose key is forgotten between the reconciler's visits) leaves the
	// operation to the reconciliation deadline, as designed.
	lastRefused bool
	// saw409: a 409 that was not a replay reached the client: "in flight",
	// by the outcome table, which a client may read as the key being
	// another request's even when the 409 was our own handler's.
	saw409  bool
	flagged map[string]bool
}

type event struct {
	at   time.Duration // true time since the history began
	life int
	text string
}

type violation struct {
	kind, detail string
}

// history is one run of the model, from its seed.
type history struct {
	seed  uint64
	rng   *rand.Rand
	prof  modelProfile
	ops   []*modelOp
	byKey map[string]*modelOp
	lives []lifePlan
	start time.Time

	clock  *modelClock
	base   idem.Store
	mem    *memStore // base, when it is one
	window time.Duration

	mu         sync.Mutex // guards what follows, the server and the ops' observations
	srv        modelServer
	events     []event
	violations []violation
	seq        int64
	life       int
	lifeReqs   int
	lifeHeads  int // clock probes (HEAD) this life sent
	requests   int
	dead       *atomic.Bool // this life's process has crashed
	cancel     context.CancelCauseFunc
	healAt     time.Time
	runaway    bool
	extra      []idem.Option // more options for every Client
}

type historyResult struct {
	seed       uint64
	violations []violation
	outcomes   []string
	text       string // the plan and events, filled in when asked for
}

// TestModel runs the randomized model-based test; see the comment at the
// top of this file.
func TestModel(t *testing.T) {
	first, n := *modelSeed, *modelN
	seedSet, nSet := false, false
	flag.Visit(func(f *flag.Flag) {
		seedSet = seedSet || f.Name == "model.seed"
		nSet = nSet || f.Name == "model.n"
	})
	if seedSet && !nSet {
		n = 1
	}
	if testing.Short() && !nSet {
		n = min(n, 1000)
	}
	verbose := testing.Verbose() && n == 1
	workers := runtime.GOMAXPROCS(0)
	stores := make([]idem.Store, workers)
	for w := range stores {
		switch *modelStore {
		case "mem":
		case "bbolt":
			j, err := journal.Open(filepath.Join(t.TempDir(), fmt.Sprintf("model-%d.journal", w)), journal.WithUnsafeNoSync())
			if err != nil {
				t.Fatalf("journal.Open: %v", err)
			}
			t.Cleanup(func() { _ = j.Close() })
			stores[w] = j
		default:
			t.Fatalf("-model.store=%q: want mem or bbolt", *modelStore)
		}
	}

	start := time.Now()
	cpuStart := processCPU()
	results := runHistories(first, n, stores, verbose)
	elapsed, cpu := time.Since(start), processCPU()-cpuStart

	byKind := map[string][]uint64{}
	outcomes := map[string]int{}
	var failed []*historyResult
	for _, r := range results {
		for _, o := range r.outcomes {
			outcomes[o]++
		}
		if len(r.violations) == 0 {
			continue
		}
		failed = append(failed, r)
		seen := map[string]bool{}
		for _, v := range r.violations {
			if !seen[v.kind] {
				seen[v.kind] = true
				byKind[v.kind] = append(byKind[v.kind], r.seed)
			}
		}
	}
	t.Logf("%d histories (seeds %d..%d) in %v wall, %v CPU, %d workers, journal %s", n, first, first+uint64(n)-1,
		elapsed.Round(time.Millisecond), cpu.Round(time.Millisecond), workers, *modelStore)
	if testing.Verbose() {
		for _, k := range slices.Sorted(maps.Keys(outcomes)) {
			t.Logf("  outcome %-48s %6d", k, outcomes[k])
		}
	}
	if verbose && len(failed) == 0 {
		t.Logf("history of seed %d:\n%s", first, results[0].text)
	}
	if len(failed) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d histories broke an invariant:\n", len(failed), n)
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		seeds := byKind[k]
		fmt.Fprintf(&b, "  %-50s %5d histories, seeds %v\n", k, len(seeds), seeds[:min(len(seeds), 8)])
	}
	for i, r := range failed[:min(len(failed), max(*modelShow, 20))] {
		if i < *modelShow {
			fmt.Fprintf(&b, "\nhistory of seed %d (replay: go test -run 'TestModel$' -model.seed=%d -v):\n%s", r.seed, r.seed, r.text)
		} else {
			fmt.Fprintf(&b, "\nseed %d: %v\n", r.seed, r.violations)
		}
	}
	t.Error(b.String())
}

// runHistories plays the histories of seeds first..first+n-1, one worker
// per store (a nil store: a fresh in-memory journal per history). extra
// options go to every Client.
func runHistories(first uint64, n int, stores []idem.Store, verbose bool, extra ...idem.Option) []*historyResult {
	results := make([]*historyResult, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	// A history takes milliseconds. One that takes a minute has hung in
	// the client: name its seed rather than wait for go test's timeout.
	running := make([]atomic.Uint64, len(stores))
	stop := make(chan struct{})
	go watchHistories(running, stop)
	for w := range stores {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					running[w].Store(0)
					return
				}
				running[w].Store(first + uint64(i))
				results[i] = runHistory(first+uint64(i), stores[w], verbose, extra...)
			}
		})
	}
	wg.Wait()
	close(stop)
	return results
}

// TestModelCatchesBrokenClients shows that the model can fail: clients
// broken on purpose (through options, as a user could break them) must
// each break the invariant their flaw threatens within a few hundred
// histories. A model that lost its teeth would pass them.
func TestModelCatchesBrokenClients(t *testing.T) {
	tests := []struct {
		name string
		opt  idem.Option
		want string
	}{
		{
			// A 5xx taken as a refusal: a first attempt the server executed
			// (500 after commit) fails.
			name: "5xx read as rejected",
			opt: idem.WithClassifier(func(code int) idem.Verdict {
				if code >= 500 {
					return idem.Rejected
				}
				return idem.DefaultClassifier(code)
			}),
			want: vWrongFailure,
		},
		{
			// Any 2xx taken as success, garbage included.
			name: "credulous decoder",
			opt: idem.WithDecoder(func(a *idem.Answer) (idem.Outcome, error) {
				if out, err := idem.DecodeJSON(a); err == nil {
					return out, nil
				}
				return idem.Outcome{State: idem.StateSucceeded, ResourceID: "unread"}, nil
			}),
			want: vWrongSuccessID,
		},
		{
			// A key conflict read as "maybe executed": resent for ever.
			name: "422 read as ambiguous",
			opt: idem.WithClassifier(func(code int) idem.Verdict {
				if code == http.StatusUnprocessableEntity {
					return idem.Ambiguous
				}
				return idem.DefaultClassifier(code)
			}),
			want: vResendFinal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 500
			caught := 0
			for _, r := range runHistories(1, n, make([]idem.Store, runtime.GOMAXPROCS(0)), false, tt.opt) {
				if slices.ContainsFunc(r.violations, func(v violation) bool { return v.kind == tt.want }) {
					caught++
				}
			}
			if caught == 0 {
				t.Errorf("%d histories with a client whose %s: no %q; want some", n, tt.name, tt.want)
			}
			t.Logf("%d of %d histories caught %q", caught, n, tt.want)
		})
	}
}

// historyHangs is how long one history may run in real time.
const historyHangs = time.Minute

// watchHistories panics, naming the seed, when a worker stays on one
// history for historyHangs.
func watchHistories(running []atomic.Uint64, stop <-chan struct{}) {
	tick := time.NewTicker(historyHangs)
	defer tick.Stop()
	last := make([]uint64, len(running))
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for w := range running {
			seed := running[w].Load()
			if seed != 0 && seed == last[w] {
				panic(fmt.Sprintf("model: the history of seed %d has run for over %v: the client hangs (replay: go test -run 'TestModel$' -model.seed=%d -v)", seed, historyHangs, seed))
			}
			last[w] = seed
		}
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runHistory plays the history of seed on a fresh server and clock; shared
// is a journal reused across histories (nil: a fresh in-memory one).
func runHistory(seed uint64, shared idem.Store, verbose bool, extra ...idem.Option) *historyResult {
	h := newHistory(seed, shared)
	h.extra = extra
	h.play()
	h.check()
	res := &historyResult{seed: seed, violations: h.violations, outcomes: h.outcomes()}
	if len(h.violations) > 0 || verbose {
		res.text = h.String()
	}
	if shared != nil {
		h.retire()
	}
	return res
}

func newHistory(seed uint64, shared idem.Store) *history {
	rng := rand.New(rand.NewPCG(seed, 0x1de3))
	h := &history{seed: seed, rng: rng, byKey: map[string]*modelOp{}, start: modelEpoch}
	h.plan()
	h.srv = modelServer{prof: &h.prof, entries: map[string]*srvEntry{}}
	h.clock = newModelClock(h.start)
	if shared != nil {
		h.base = shared
	} else {
		h.mem = newMemStore()
		h.base = h.mem
	}
	h.window = idem.DefaultKeyRetention
	if h.prof.clientKnows {
		h.window = h.prof.window
	}
	return h
}

// pick returns the index of a weighted choice.
func pick(rng *rand.Rand, weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	r := rng.IntN(total)
	for i, w := range weights {
		if r < w {
			return i
		}
		r -= w
	}
	return len(weights) - 1
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// plan draws the server, the intents and the lives from the seed.
func (h *history) plan() {
	rng, p := h.rng, &h.prof
	p.bodyCheck = bodyCheck(pick(rng, 50, 15, 35))
	p.storeErrors = rng.IntN(10) < 4
	switch pick(rng, 35, 15, 50) {
	case 0: // a short window the client is told: a framework's 30 min, or another
		p.window, p.clientKnows = 30*time.Minute, true
		if rng.IntN(2) == 0 {
			p.window = between(rng, 5*time.Minute, 2*time.Hour).Round(time.Second)
		}
	case 1: // a documented long window (Stripe's 24 h), configured
		p.window, p.clientKnows = 24*time.Hour, true
	default: // not configured: the server keeps keys at least as long as the client's default
		p.window = idem.DefaultKeyRetention + between(rng, 0, idem.DefaultKeyRetention).Round(time.Second)
	}
	if p.clientKnows && rng.IntN(2) == 0 {
		p.knowsBy = knowByHost
	}
	p.conflict417 = p.bodyCheck == bodyCheck417 && rng.IntN(2) == 0
	p.quotedKey = p.bodyCheck == bodyCheck422 && rng.IntN(2) == 0
	p.resultEP = rng.IntN(2) == 0
	p.idShape = rng.IntN(10) < 3
	if rng.IntN(10) < 3 {
		p.skew = between(rng, -2*time.Minute, 2*time.Minute).Round(time.Second)
	}
	if rng.IntN(10) < 4 {
		p.lag = between(rng, time.Second, 10*time.Minute).Round(time.Second)
	}
	p.faultRate = []float64{0.05, 0.2, 0.4, 0.6}[rng.IntN(4)]

	nOps := 1 + pick(rng, 45, 30, 15, 10)
	anyForeign := false
	for i := range nOps {
		op := &modelOp{
			idx:        i,
			key:        fmt.Sprintf("h%d-op%d", h.seed, i),
			viaPrepare: rng.IntN(5) == 0,
			handler:    h.drawHandler(),
			rng:        rand.New(rand.NewPCG(h.seed, uint64(i)+1)),
			lastState:  "none",
			flagged:    map[string]bool{},
		}
		op.body = fmt.Appendf(nil, `{"order":%q,"amount":%d}`, op.key, 100+rng.IntN(10000))
		if rng.IntN(5) == 0 {
			fp := &foreignPlan{body: fmt.Appendf(nil, `{"order":"foreign","amount":%d}`, 1+rng.IntN(99)), handler: h.drawHandler()}
			if rng.IntN(2) == 0 {
				fp.inflight = between(rng, time.Second, 5*time.Minute).Round(time.Second)
			}
			op.foreign = fp
			anyForeign = true
		}
		h.ops = append(h.ops, op)
		h.byKey[op.key] = op
	}

	crashes := pick(rng, 25, 40, 25, 10)
	offset := time.Duration(0)
	for i := range crashes + 1 {
		lp := lifePlan{redo: 0.5, concurrent: rng.IntN(4) == 0}
		if i > 0 {
			switch pick(rng, 85, 10, 5) {
			case 1: // the clock is stepped forward while the process is down
				offset += between(rng, time.Minute, 3*time.Hour).Round(time.Second)
			case 2: // or far back, as a host with a reset clock
				offset -= 30 * 24 * time.Hour
			}
		}
		lp.offset = offset
		if i < crashes {
			lp.crash = crashKind(1 + pick(rng, 30, 30, 20, 20))
			if anyForeign && lp.crash >= crashBeforeSend {
				// An attempt journaled and never answered is "maybe
				// executed" for ever; with a foreign request on the key no
				// client could then tell its answer from ours. Such a
				// crash is drawn only where nothing is open (fairCrash).
				lp.crash -= 2
			}
			if lp.crash <= crashWriteCommits {
				lp.n = 1 + rng.IntN(10)
			} else {
				lp.n = 1 + rng.IntN(6)
			}
			if rng.IntN(3) > 0 {
				lp.runFor = between(rng, 0, 3*time.Hour)
			}
		} else {
			lp.heal = between(rng, 0, 30*time.Minute)
		}
		h.lives = append(h.lives, lp)
	}
}

// drawHandler draws what the application does with one request body.
func (h *history) drawHandler() handlerPlan {
	rng := h.rng
	switch pick(rng, 75, 12, 13) {
	case 1:
		statuses := []int{http.StatusPaymentRequired, http.StatusBadRequest}
		if h.prof.storeErrors {
			statuses = append(statuses, http.StatusConflict)
		}
		return handlerPlan{kind: hDecline, status: statuses[rng.IntN(len(statuses))]}
	case 2:
		// Handler errors matter only where the server stores them: else
		// the key is released and the error is a 500 before commit.
		if h.prof.storeErrors {
			return handlerPlan{kind: hError, status: []int{500, 503, 502}[rng.IntN(3)], effect: rng.IntN(2) == 0}
		}
	}
	return handlerPlan{kind: hSucceed}
}

// play runs the lives: the first sends the intents, each later one
// resumes the journal the crashed one left, and the last runs the
// reconciler until everything settled or was flagged.
func (h *history) play() {
	for i, lp := range h.lives {
		final := i == len(h.lives)-1
		cl, ctx := h.startLife(i, lp)
		if i == 0 || h.resume(ctx, cl) {
			var run chan struct{}
			if lp.concurrent {
				run = make(chan struct{})
				h.startReconciler(lp, final, false)
				go func() {
					defer close(run)
					h.reconcile(ctx, cl)
				}()
			}
			if i == 0 {
				h.firstLife(ctx, cl)
			} else {
				h.redeliver(ctx, cl, lp)
			}
			h.clock.appDone()
			switch {
			case lp.concurrent:
				<-run
			case !h.crashed():
				h.startReconciler(lp, final, true)
				h.reconcile(ctx, cl)
			}
		}
		h.cancel(nil)
		if err := cl.Close(); err != nil {
			h.violate(nil, vUnexpectedError, "Close: %v", err)
		}
		if h.runaway {
			return
		}
	}
}

func (h *history) startLife(i int, lp lifePlan) (*idem.Client, context.Context) {
	h.mu.Lock()
	h.life, h.lifeReqs, h.lifeHeads = i, 0, 0
	h.dead = new(atomic.Bool)
	h.mu.Unlock()
	h.clock.setOffset(lp.offset)
	now := h.clock.trueNow()
	if i == len(h.lives)-1 {
		h.healAt = now.Add(lp.heal)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	h.cancel = cancel
	h.logf("life %d starts: %v at write/request %d; client clock %+v", i, lp.crash, lp.n, lp.offset)
	store := &crashStore{h: h, base: h.base, dead: h.dead, plan: lp}
	opts := []idem.Option{
		idem.WithHTTPClient(&http.Client{Transport: &modelTransport{h: h}}),
		idem.WithClock(h.clock),
		// Every life is the one process restarted under its name: its
		// Resume takes its dead predecessor's leases anew. The model's
		// clock jumps whenever Run sleeps, while a call is between two
		// steps: with a lease of seconds, a call would lose its lease to
		// its own process's Run in virtual time, as a process stalled
		// past its lease would (a crash, as far as what it learned is
		// concerned). Leases and their expiry are tested elsewhere
		// (lease_test.go, journaltest, pgjournal).
		idem.WithLease("model-process", 10*365*24*time.Hour),
	}
	if h.prof.resultEP {
		opts = append(opts, idem.WithResultEndpoint(modelQuery))
	}
	if p := h.prof; p.clientKnows {
		w := p.window
		switch w {
		case 30 * time.Minute:
			w = idem.KeyRetentionFiber
		case 24 * time.Hour:
			w = idem.KeyRetentionStripe
		}
		if p.knowsBy == knowByHost {
			// The host's window must win over a longer default.
			opts = append(opts, idem.WithHostKeyRetention("127.0.0.1:1", w), idem.WithKeyRetention(48*time.Hour))
		} else {
			opts = append(opts, idem.WithKeyRetention(w))
		}
	}
	if h.prof.conflict417 {
		opts = append(opts, idem.WithKeyConflictStatus(http.StatusExpectationFailed))
	}
	if h.prof.quotedKey {
		opts = append(opts, idem.WithKeyHeader(idem.DefaultKeyHeader, idem.KeyQuoted))
	}
	opts = append(opts, h.extra...)
	cl, err := idem.New(store, opts...)
	if err != nil {
		panic(fmt.Sprintf("model: idem.New: %v", err))
	}
	return cl, ctx
}

// crash ends this life's process: every later journal write and request
// fails, and the call in progress is cancelled.
func (h *history) crash(format string, args ...any) {
	if h.dead.Swap(true) {
		return
	}
	h.logfLocked("CRASH: "+format, args...)
	h.cancel(errCrashed)
}

func (h *history) crashed() bool { return h.dead.Load() }

// firstLife sends each intent once, as the application would.
func (h *history) firstLife(ctx context.Context, cl *idem.Client) {
	for _, op := range h.ops {
		if h.crashed() {
			return
		}
		h.clock.advance(between(op.rng, 0, 3*time.Second))
		h.call(ctx, cl, op)
	}
}

// resume is a new process's first step on the surviving journal. It
// reports whether the process is still alive.
func (h *history) resume(ctx context.Context, cl *idem.Client) bool {
	sum, err := cl.Resume(ctx)
	if h.crashed() {
		return false
	}
	h.logf("Resume: %+v, err %v", sum, err)
	if err != nil {
		h.violate(nil, vUnexpectedError, "Resume: %v", err)
	}
	return true
}

// redeliver sends again (same key, same body) what the application has no
// answer for, as a redelivered message would.
func (h *history) redeliver(ctx context.Context, cl *idem.Client, lp lifePlan) {
	for _, op := range h.ops {
		if h.crashed() {
			return
		}
		if op.appFinal {
			continue
		}
		_, gerr := h.base.Get(context.Background(), modelScope, op.key)
		if gerr == nil && h.rng.Float64() >= lp.redo {
			continue
		}
		h.call(ctx, cl, op)
	}
}

// call sends op as the application does (Submit, or Prepare and Do) and
// checks what it is told against the journal.
func (h *history) call(ctx context.Context, cl *idem.Client, op *modelOp) {
	req := idem.Request{Key: op.key, URL: modelURL, Body: op.body}
	var res *idem.Result
	var err error
	how := "Submit"
	if op.viaPrepare {
		how = "Prepare+Do"
		var o *idem.Operation
		o, err = cl.Prepare(ctx, req)
		if err == nil {
			res, err = cl.Do(ctx, o)
		}
	} else {
		res, err = cl.Submit(ctx, req)
	}
	h.clock.appStep()
	state := journal.State("-")
	if res != nil {
		state = res.State
	}
	h.logf("app: %s %s → %s, err %v", how, op.key, state, err)
	// With the reconciler running alongside, an open operation may move on
	// between the call's return and this look at the journal.
	concurrent := h.lives[h.life].concurrent
	if h.crashed() {
		return
	}
	rec, gerr := h.base.Get(context.Background(), modelScope, op.key)
	switch {
	case err == nil:
		op.appFinal = true
		if gerr != nil || rec.State != idem.StateSucceeded || res == nil || res.State != idem.StateSucceeded ||
			rec.Result == nil || res.ResourceID != rec.Result.ResourceID || failureAgainst(rec) {
			// A success a failure contradicts may be unpaid: never nil.
			h.violate(op, vCallerOutcome, "%s returned success (%+v) but the journal holds %v", how, res, describeRecord(rec, gerr))
		}
	case errors.Is(err, idem.ErrFailed):
		op.appFinal = true
		if gerr != nil || rec.State != idem.StateFailed || rec.Review != "" {
			// Flagged, the failure may have executed: never ErrFailed.
			h.violate(op, vCallerOutcome, "%s returned ErrFailed but the journal holds %v", how, describeRecord(rec, gerr))
		} else if h.keyConflict(rec) && !errors.Is(err, idem.ErrKeyConflict) {
			h.violate(op, vCallerOutcome, "%s failed on a key conflict (%s) but its error does not match ErrKeyConflict: %v", how, describeRecord(rec, nil), err)
		}
	case errors.Is(err, idem.ErrKeyConflict):
		op.appFinal = true
	case errors.Is(err, idem.ErrUnknownOutcome) && concurrent:
	case errors.Is(err, idem.ErrUnknownOutcome):
		contradicted := gerr == nil && (rec.State == idem.StateFailed && rec.Review != "" || failureAgainst(rec))
		if gerr != nil || rec.State.Terminal() && !contradicted {
			h.violate(op, vCallerOutcome, "%s returned ErrUnknownOutcome but the journal holds %v", how, describeRecord(rec, gerr))
		}
		if gerr == nil && rec.Review != "" && !errors.Is(err, idem.ErrNeedsReview) {
			h.violate(op, vCallerOutcome, "%s left it flagged %q but its error does not match ErrNeedsReview: %v", how, rec.Review, err)
		}
		if gerr == nil && rec.Review == idem.ReviewKeyInUse && !errors.Is(err, idem.ErrKeyConflict) {
			h.violate(op, vCallerOutcome, "%s left it flagged %q but its error does not match ErrKeyConflict: %v", how, rec.Review, err)
		}
	default:
		h.violate(op, vUnexpectedError, "%s: %v", how, err)
	}
}

// failureAgainst reports whether rec settled succeeded while a failure
// contradicts it: a confirmation or the server's answer that said failed,
// kept beside it, about the resource the success names or about none.
func failureAgainst(rec *journal.Record) bool {
	if rec == nil || rec.State != idem.StateSucceeded || rec.Review != idem.ReviewConfirmConflict {
		return false
	}
	id := ""
	if rec.Result != nil {
		id = rec.Result.ResourceID
	}
	for _, c := range rec.Confirmations {
		if c.Effect == journal.ConfirmConflicted && c.State == idem.StateFailed && (id == "" || c.ResourceID == "" || c.ResourceID == id) {
			return true
		}
	}
	return false
}

// keyConflict reports whether rec failed on the server's "key used with
// another body" (422, or 417 where the client was told so), the first
// answer of an operation none of whose attempts had executed.
func (h *history) keyConflict(rec *journal.Record) bool {
	if rec.Result == nil || rec.Resolved != nil {
		return false
	}
	switch rec.Result.StatusCode {
	case http.StatusUnprocessableEntity:
		return h.prof.bodyCheck == bodyCheck422
	case http.StatusExpectationFailed:
		return h.prof.conflict417
	}
	return false
}

func describeRecord(rec *journal.Record, err error) string {
	if err != nil {
		return err.Error()
	}
	s := string(rec.State)
	if rec.Review != "" {
		s += " (review: " + rec.Review + ")"
	}
	if rec.Result != nil {
		s += fmt.Sprintf(" status %d resource %q", rec.Result.StatusCode, rec.Result.ResourceID)
	}
	return s
}

// reconcile runs the client's reconciler for the life's span, on virtual
// time that skips ahead to the next operation due.
func (h *history) reconcile(ctx context.Context, cl *idem.Client) {
	err := cl.Run(context.WithValue(ctx, runCtxKey{}, true))
	h.clock.stopRun()
	switch {
	case h.crashed(), errors.Is(err, errRunOver):
	case errors.Is(err, errRunaway):
		h.markRunaway("Run")
	default:
		h.violate(nil, vUnexpectedError, "Run: %v", err)
	}
}

// startReconciler readies the clock for Run: from now, for the life's
// span. appDone: the application has made its calls already.
func (h *history) startReconciler(lp lifePlan, final, appDone bool) {
	span := lp.runFor
	if final {
		span = finalLifeSpan
	}
	h.clock.startRun(h.clock.trueNow().Add(span), final, appDone, h.nextDue)
}

// runCtxKey marks the context of Run, whose clock waits are its polls.
type runCtxKey struct{}

// nextDue is when the journal's next open operation is due (client time),
// whether every open one is flagged for review, and whether any is open.
func (h *history) nextDue() (time.Time, bool, bool) {
	if h.mem != nil {
		return h.mem.nextDue()
	}
	var due time.Time
	ok, allFlagged := false, true
	_ = h.base.ForEachOpen(context.Background(), func(r *journal.Record) error {
		if !ok || r.NextDue.Before(due) {
			due, ok = r.NextDue, true
		}
		allFlagged = allFlagged && r.Review != ""
		return nil
	})
	return due, allFlagged, ok
}

func (h *history) markRunaway(where string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.runaway {
		h.runaway = true
		h.violations = append(h.violations, violation{vRunaway, where + ": more than the bounded requests or sleeps"})
		h.logfLocked("RUNAWAY in %s", where)
	}
}

// retire settles what a history left open in a journal shared with the
// next histories, so that their reconcilers never see it.
func (h *history) retire() {
	for _, op := range h.ops {
		if _, err := h.base.Resolve(context.Background(), modelScope, op.key, journal.Manual{
			State: journal.StateFailed, Reason: "model: history over", By: "model", At: h.clock.Now(),
		}); err != nil && !errors.Is(err, journal.ErrNotFound) {
			panic(fmt.Sprintf("model: retire %s: %v", op.key, err))
		}
	}
}

// check judges the history once it is over.
func (h *history) check() {
	if h.runaway {
		return
	}
	for _, op := range h.ops {
		rec, err := h.base.Get(context.Background(), modelScope, op.key)
		if len(op.effects) > 1 {
			h.violate(op, vDuplicate, "our request created %v", op.effects)
		}
		if err != nil {
			if op.submits > 0 {
				h.violate(op, vNotJournaled, "%d submits, no journal record: %v", op.submits, err)
			}
			continue
		}
		switch rec.State {
		case idem.StateSucceeded:
			switch {
			case len(op.effects) == 0:
				h.violate(op, vWrongSuccess, "journal %s; our request created nothing (foreign: %v)", describeRecord(rec, nil), h.foreignResult(op))
			case rec.Result == nil || !slices.Contains(op.effects, rec.Result.ResourceID):
				h.violate(op, vWrongSuccessID, "journal %s; our request created %v", describeRecord(rec, nil), op.effects)
			}
		case idem.StateFailed:
			if len(op.effects) > 0 {
				h.violate(op, vWrongFailure, "journal %s; our request created %v", describeRecord(rec, nil), op.effects)
			}
		default:
			if rec.Review == idem.ReviewKeyInUse && (op.foreign == nil || !op.foreign.applied) && !op.saw409 {
				h.violate(op, vWrongReview, "journal %s; our request created %v", describeRecord(rec, nil), op.effects)
			}
			switch rec.Review {
			case "":
				if op.lastRefused && h.lives[len(h.lives)-1].offset < 0 {
					// As below, the reconciliation deadline is this
					// operation's only way out, and a clock stepped back
					// puts it off by the step: Created lies in the future.
					break
				}
				h.violate(op, vStuck, "journal %s, next due %v", describeRecord(rec, nil), rec.NextDue.Sub(h.clock.Now()))
			case idem.ReviewDeadlinePassed:
				if op.lastRefused {
					break
				}
				h.violate(op, vStuckDeadline, "journal %s after %d submits, %d queries", describeRecord(rec, nil), op.submits, op.queries)
			}
		}
	}
}

func (h *history) foreignResult(op *modelOp) string {
	if op.foreign == nil {
		return "none"
	}
	return fmt.Sprintf("applied %v, created %q", op.foreign.applied, op.foreign.resID)
}

// outcomes names where each operation ended, for the summary.
func (h *history) outcomes() []string {
	out := make([]string, 0, len(h.ops))
	for _, op := range h.ops {
		rec, err := h.base.Get(context.Background(), modelScope, op.key)
		switch {
		case err != nil:
			out = append(out, "never journaled")
		case rec.State.Terminal():
			out = append(out, string(rec.State))
		case rec.Review != "":
			out = append(out, "review: "+truncateString(rec.Review, 40))
		default:
			out = append(out, "open: "+string(rec.State))
		}
	}
	return out
}

func truncateString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (h *history) violate(op *modelOp, kind, format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violateLocked(op, kind, format, args...)
}

// violateLocked records a violation once per operation and kind.
func (h *history) violateLocked(op *modelOp, kind, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	if op != nil {
		if op.flagged[kind] {
			return
		}
		op.flagged[kind] = true
		detail = op.key + ": " + detail
	}
	h.violations = append(h.violations, violation{kind, detail})
	h.logfLocked("VIOLATION %s: %s", kind, detail)
}

func (h *history) logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logfLocked(format, args...)
}

func (h *history) logfLocked(format string, args ...any) {
	h.events = append(h.events, event{at: h.clock.trueNow().Sub(h.start), life: h.life, text: fmt.Sprintf(format, args...)})
}

// String prints the plan and every event, for a failing seed.
func (h *history) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  server: %s\n", &h.prof)
	fmt.Fprintf(&b, "  client key window %v, result endpoint %v\n", h.window, h.prof.resultEP)
	for _, op := range h.ops {
		fmt.Fprintf(&b, "  intent %s: handler %v, via Prepare %v", op.key, op.handler, op.viaPrepare)
		if fp := op.foreign; fp != nil {
			fmt.Fprintf(&b, "; foreign request on its key: handler %v, in flight %v", fp.handler, fp.inflight)
		}
		b.WriteString("\n")
	}
	for i, lp := range h.lives {
		fmt.Fprintf(&b, "  life %d: %v at %d, clock %+v, run %v (alongside the calls: %v), heal after %v\n",
			i, lp.crash, lp.n, lp.offset, lp.runFor, lp.concurrent, lp.heal)
	}
	for _, e := range h.events {
		fmt.Fprintf(&b, "  %12s L%d %s\n", e.at.Round(time.Millisecond), e.life, e.text)
	}
	for _, v := range h.violations {
		fmt.Fprintf(&b, "  => %s: %s\n", v.kind, v.detail)
	}
	return b.String()
}

// noteCommit follows the journal: state changes for the history, and the
// moment an operation became terminal (no request may follow it).
func (h *history) noteCommit(rec *journal.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op := h.byKey[rec.Key]
	if op == nil {
		return
	}
	h.seq++
	if rec.State.Terminal() && op.terminalSeq == 0 {
		op.terminalSeq = h.seq
	}
	if rec.State != op.lastState || rec.Review != op.lastReview {
		op.lastState, op.lastReview = rec.State, rec.Review
		h.logfLocked("journal: %s %s", rec.Key, describeRecord(rec, nil))
	}
}

// fairCrash reports whether the process may die now: in a history with a
// foreign request, not while one of those operations has a journaled
// attempt without an outcome (see plan).
func (h *history) fairCrash() bool {
	for _, op := range h.ops {
		if op.foreign == nil {
			continue
		}
		rec, err := h.base.Get(context.Background(), modelScope, op.key)
		if err != nil {
			continue
		}
		for _, a := range rec.Attempts {
			if a.Kind == journal.AttemptSubmit && !a.Done {
				return false
			}
		}
	}
	return true
}

// crashStore is the journal as one process sees it: after the process
// dies, nothing more is read or committed.
type crashStore struct {
	h      *history
	base   idem.Store
	dead   *atomic.Bool
	plan   lifePlan
	mu     sync.Mutex
	writes int
}

func (s *crashStore) write(what string, fn func() (*journal.Record, error)) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead.Load() {
		return nil, errCrashed
	}
	s.writes++
	due := s.writes >= s.plan.n
	if s.plan.crash == crashWriteFails && due && s.h.fairCrash() {
		s.h.mu.Lock()
		s.h.crash("journal write #%d (%s) fails", s.writes, what)
		s.h.mu.Unlock()
		return nil, errCrashed
	}
	rec, err := fn()
	if err == nil && rec != nil {
		s.h.noteCommit(rec)
	}
	if s.plan.crash == crashWriteCommits && due && s.h.fairCrash() {
		s.h.mu.Lock()
		s.h.crash("journal write #%d (%s) committed, then the process died", s.writes, what)
		s.h.mu.Unlock()
		return nil, errCrashed
	}
	return rec, err
}

func (s *crashStore) read() error {
	if s.dead.Load() {
		return errCrashed
	}
	return nil
}

func (s *crashStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	return s.write("create "+rec.Key, func() (*journal.Record, error) { return s.base.Create(ctx, rec) })
}

func (s *crashStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	return s.write("update "+key, func() (*journal.Record, error) { return s.base.Update(ctx, scope, key, fn) })
}

func (s *crashStore) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	return s.write("resolve "+key, func() (*journal.Record, error) { return s.base.Resolve(ctx, scope, key, m) })
}

func (s *crashStore) Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error) {
	return s.write("confirm "+key, func() (*journal.Record, error) { return s.base.Confirm(ctx, scope, key, c) })
}

func (s *crashStore) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	if err := s.read(); err != nil {
		return nil, err
	}
	return s.base.Get(ctx, scope, key)
}

func (s *crashStore) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	if err := s.read(); err != nil {
		return err
	}
	return s.base.ForEachOpen(ctx, fn)
}

func (s *crashStore) Due(ctx context.Context, by time.Time, limit int) ([]*journal.Record, error) {
	if err := s.read(); err != nil {
		return nil, err
	}
	return s.base.Due(ctx, by, limit)
}

func (s *crashStore) ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]journal.Claimed, error) {
	if err := s.read(); err != nil {
		return nil, err
	}
	return s.base.ClaimDue(ctx, owner, now, expires, limit)
}

func (s *crashStore) Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	if err := s.read(); err != nil {
		return nil, journal.Lease{}, err
	}
	return s.base.Claim(ctx, scope, key, owner, now, expires)
}

func (s *crashStore) Renew(ctx context.Context, l journal.Lease, expires time.Time) (journal.Lease, error) {
	if err := s.read(); err != nil {
		return journal.Lease{}, err
	}
	return s.base.Renew(ctx, l, expires)
}

func (s *crashStore) Release(ctx context.Context, l journal.Lease) error {
	if err := s.read(); err != nil {
		return err
	}
	return s.base.Release(ctx, l)
}

func (s *crashStore) List(ctx context.Context, f journal.Filter) ([]*journal.Record, error) {
	if err := s.read(); err != nil {
		return nil, err
	}
	return s.base.List(ctx, f)
}

func (s *crashStore) Prune(ctx context.Context, settledBefore time.Time) (int, error) {
	if err := s.read(); err != nil {
		return 0, err
	}
	// Pruning would let the final check miss what a history settled.
	return 0, nil
}

// Close does not close the surviving journal: the next life reopens it.
func (s *crashStore) Close() error { return nil }

// modelClock is the history's virtual time. The server reads true time;
// the client reads true time plus its life's offset (a stepped clock).
// Sleep advances time at once. Run's poll (a Sleep with Run's context)
// skips ahead to the next operation due, and ends Run (errRunOver) at the
// horizon, or when nothing open is left unflagged (the last life). While
// the application is still making calls, the poll waits for the next call
// to end instead, so that the reconciler makes one pass alongside each.
type modelClock struct {
	mu           sync.Mutex
	now          time.Time
	offset       time.Duration
	running      bool
	horizon      time.Time
	untilFlagged bool
	nextDue      func() (time.Time, bool, bool)
	sleeps       int
	cond         *sync.Cond // signals appSteps, appFinished and cancellations
	appFinished  bool
	appSteps     int
}

func newModelClock(now time.Time) *modelClock {
	c := &modelClock{now: now}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// appStep tells a poll waiting for the application that a call ended.
func (c *modelClock) appStep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appSteps++
	c.cond.Broadcast()
}

// appDone tells the polls that the application made all its calls.
func (c *modelClock) appDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appFinished = true
	c.cond.Broadcast()
}

func (c *modelClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Add(c.offset)
}

func (c *modelClock) trueNow() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *modelClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(max(d, 0))
}

func (c *modelClock) setOffset(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = d
}

func (c *modelClock) startRun(horizon time.Time, untilFlagged, appDone bool, nextDue func() (time.Time, bool, bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running, c.horizon, c.untilFlagged, c.appFinished, c.nextDue = true, horizon, untilFlagged, appDone, nextDue
}

func (c *modelClock) stopRun() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
}

func (c *modelClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps++
	if c.sleeps > maxSleepsPerHistory {
		return errRunaway
	}
	next := c.now.Add(max(d, 0))
	if !c.running || ctx.Value(runCtxKey{}) == nil {
		c.now = next
		return nil
	}
	if !c.appFinished {
		seen := c.appSteps
		stop := context.AfterFunc(ctx, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.cond.Broadcast()
		})
		defer stop()
		for !c.appFinished && c.appSteps == seen && ctx.Err() == nil {
			c.cond.Wait()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !c.appFinished {
			c.now = c.now.Add(max(d, 0))
			return nil
		}
		next = c.now.Add(max(d, 0))
	}
	due, allFlagged, ok := c.nextDue()
	if !ok || (c.untilFlagged && allFlagged) {
		return errRunOver
	}
	if t := due.Add(-c.offset); t.After(next) {
		next = t
	}
	if !next.Before(c.horizon) {
		return errRunOver
	}
	c.now = next
	return nil
}

// modelTransport hands every request to the model: no socket is opened.
// It reports the httptrace events net/http would, so the client can tell
// a request that never left from one that may have been executed.
type modelTransport struct{ h *history }

func (tr *modelTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	trace := httptrace.ContextClientTrace(req.Context())
	if trace != nil && trace.GetConn != nil {
		trace.GetConn(req.URL.Host)
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	a, err := tr.h.exchange(req, body)
	if err != nil {
		return nil, err
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{})
	}
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	if a.lost {
		if a.timeout {
			return nil, fmt.Errorf("model: no answer within the attempt timeout: %w", context.DeadlineExceeded)
		}
		return nil, errors.New("model: connection reset after the request was written")
	}
	return &http.Response{
		StatusCode:    a.status,
		Status:        fmt.Sprintf("%d %s", a.status, http.StatusText(a.status)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        a.header,
		Body:          io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body)),
		Request:       req,
	}, nil
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// exchange is one request as the model sees it: crash points, faults, the
// server's answer, and the invariants that each request must keep. An
// error means the request never left the client.
func (h *history) exchange(req *http.Request, body []byte) (srvAnswer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead.Load() {
		return srvAnswer{}, errCrashed
	}
	h.requests++
	h.lifeReqs++
	if h.requests > maxRequestsPerHistory {
		if !h.runaway {
			h.runaway = true
			h.violations = append(h.violations, violation{vRunaway, fmt.Sprintf("more than %d requests", maxRequestsPerHistory)})
		}
		h.crash("runaway")
		return srvAnswer{}, errCrashed
	}
	lp := h.lives[h.life]
	if lp.crash == crashBeforeSend && h.lifeReqs >= lp.n {
		h.crash("before request #%d left", h.lifeReqs)
		return srvAnswer{}, errCrashed
	}
	h.seq++
	t := h.clock.trueNow()
	healthy := h.life == len(h.lives)-1 && !t.Before(h.healAt)

	if req.Method == http.MethodHead {
		// A clock probe (headProbe): the API routes no HEAD, and answers
		// 405 as a real one does, executing nothing; without a Date, as
		// every answer of this server's (an origin without a clock, RFC
		// 9110 6.6.1), so it teaches nothing.
		h.lifeHeads++
		if req.Header.Get("Idempotency-Key") != "" || len(body) > 0 || h.lifeHeads > 1 {
			h.violateLocked(nil, vProbe, "HEAD %s with key %q, %d body bytes, HEAD #%d this life",
				req.URL, req.Header.Get("Idempotency-Key"), len(body), h.lifeHeads)
		}
		h.logfLocked("clock probe HEAD %s → 405", req.URL.Path)
		return jsonAnswer(http.StatusMethodNotAllowed, `{"error":"method not allowed"}`), nil
	}
	var op *modelOp
	query := req.Method == http.MethodGet
	if query {
		op = h.byKey[strings.TrimPrefix(req.URL.Path, "/v1/ops/")]
	} else {
		op = h.byKey[h.keyOf(req)]
	}
	if op == nil {
		h.violateLocked(nil, vChangedRequest, "%s %s with key %q: no such intent", req.Method, req.URL, req.Header.Get("Idempotency-Key"))
		return jsonAnswer(http.StatusBadRequest, `{"error":"unknown"}`), nil
	}
	f := fNone
	if !healthy && op.rng.Float64() < h.prof.faultRate {
		switch {
		case query:
			f = queryFaults[op.rng.IntN(len(queryFaults))]
		case op.foreign != nil:
			f = fairSubmitFaults[op.rng.IntN(len(fairSubmitFaults))]
		default:
			f = allSubmitFaults[op.rng.IntN(len(allSubmitFaults))]
		}
	}
	if op.terminalSeq != 0 {
		h.violateLocked(op, vAfterTerminal, "%s after the journal settled it", req.Method)
	}
	if query {
		op.queries++
		if f == fNotWritten {
			h.logfLocked("query %s [%v]", op.key, f)
			return srvAnswer{}, errRefused
		}
		a := h.srv.query(op.key, f, op.rng, t)
		h.logfLocked("query %s [%v] → %s %s", op.key, f, answerText(a), a.note)
		return a, nil
	}

	op.submits++
	h.checkSubmit(op, req, body, t)
	if f == fNotWritten {
		h.logfLocked("submit %s [%v]", op.key, f)
		return srvAnswer{}, errRefused
	}
	a := h.srv.submit(op, h.keyOf(req), body, f, op.rng, t)
	if e := a.executed; e != nil {
		// A new execution: the server forgot the key's earlier answers,
		// which are final no longer.
		op.execs++
		op.finals = 0
		if e.resID != "" {
			op.effects = append(op.effects, e.resID)
		}
	}
	if a.final {
		if op.finals == 0 {
			op.finalLife = h.life
		}
		op.finals++
	}
	if !a.notExec && op.firstMaybe.IsZero() {
		op.firstMaybe = t
	}
	op.lastRefused = a.notExec
	if !a.lost && a.status == http.StatusConflict && a.header.Get("Idempotent-Replayed") == "" {
		op.saw409 = true
	}
	if a.timeout {
		// The attempt waited out its timeout.
		h.clock.advance(idem.DefaultAttemptTimeout)
	}
	h.logfLocked("submit %s #%d [%v] → %s %s", op.key, op.submits, f, answerText(a), a.note)
	if lp.crash == crashAfterServer && h.lifeReqs >= lp.n {
		h.crash("after the server answered request #%d", h.lifeReqs)
		return srvAnswer{}, errCrashed
	}
	return a, nil
}

// checkSubmit holds the rules every submit must keep: the journaled
// request, byte for byte, with its attempt journaled first; nothing after
// the server's final answer or past the key window.
func (h *history) checkSubmit(op *modelOp, req *http.Request, body []byte, t time.Time) {
	if req.Method != http.MethodPost || req.URL.String() != modelURL || !bytes.Equal(body, op.body) ||
		h.keyOf(req) != op.key {
		h.violateLocked(op, vChangedRequest, "%s %s key %q body %q", req.Method, req.URL, req.Header.Get("Idempotency-Key"), body)
	}
	journaled := false
	check := func(rec *journal.Record) {
		if rec == nil || len(rec.Attempts) == 0 {
			return
		}
		a := rec.Attempts[len(rec.Attempts)-1]
		journaled = a.Kind == journal.AttemptSubmit && !a.Done
	}
	if h.mem != nil {
		h.mem.peek(modelScope, op.key, check)
	} else if rec, err := h.base.Get(context.Background(), modelScope, op.key); err == nil {
		check(rec)
	}
	if !journaled {
		h.violateLocked(op, vNotJournaled, "submit #%d with no open attempt in the journal", op.submits)
	}
	if restarts := h.life - op.finalLife; op.finals >= 2+restarts {
		h.violateLocked(op, vResendFinal, "submit #%d after %d final answers (%d restarts since the first)", op.submits, op.finals, restarts)
	}
	if !op.firstMaybe.IsZero() && !t.Before(op.firstMaybe.Add(h.window)) {
		h.violateLocked(op, vResendWindow, "submit #%d at %v after the first send that may have executed (window %v)",
			op.submits, t.Sub(op.firstMaybe), h.window)
	}
}

// keyOf reads the key header as the server does: bare, or as the IETF
// draft's sf-string ("…") where the profile says so. The model's keys
// need no escaping. A key in the wrong form reads as no key.
func (h *history) keyOf(req *http.Request) string {
	v := req.Header.Get("Idempotency-Key")
	if !h.prof.quotedKey {
		return v
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return ""
	}
	return v[1 : len(v)-1]
}

func answerText(a srvAnswer) string {
	if a.lost {
		if a.timeout {
			return "(timed out)"
		}
		return "(lost)"
	}
	s := fmt.Sprintf("%d %s", a.status, truncateString(string(a.body), 80))
	if a.header.Get("Idempotent-Replayed") != "" {
		s += " [replayed]"
	}
	if ra := a.header.Get("Retry-After"); ra != "" {
		s += " [Retry-After " + ra + "]"
	}
	return s
}
