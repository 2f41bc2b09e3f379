package crashtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Scenario is one row of the fault matrix: a fake-server fault profile.
type Scenario struct {
	Name    string
	Profile idemtest.Profile
}

// MatrixRate is how often a fault strikes in the single-fault rows: every
// other submit.
const MatrixRate = 0.5

// The matrix's timings. The client and the server share a manual clock, so
// backoff, Retry-After, query lag and slow processing cost no real time; only
// the attempt timeout and the delay fault run on the wall clock.
const (
	matrixDelay          = 2 * time.Second        // query lag, slow processing (manual clock); delay fault (wall clock)
	matrixRetryAfter     = 2 * time.Second        // 429, 503 and the 409 of slow processing
	matrixAttemptTimeout = 200 * time.Millisecond // wall clock: cuts the delay fault short
)

// Scenarios returns the fault matrix: no fault, each fault of the fake
// server alone at MatrixRate, and a mixed profile with every fault at once.
func Scenarios() []Scenario {
	sc := []Scenario{{Name: "none"}}
	mixed := map[idemtest.FaultKind]float64{}
	for _, k := range idemtest.FaultKinds() {
		sc = append(sc, Scenario{Name: string(k), Profile: profile(map[idemtest.FaultKind]float64{k: MatrixRate})})
		mixed[k] = 0.05
	}
	return append(sc, Scenario{Name: "mixed", Profile: profile(mixed)})
}

func profile(rates map[idemtest.FaultKind]float64) idemtest.Profile {
	return idemtest.Profile{Rates: rates, Delay: matrixDelay, RetryAfter: matrixRetryAfter}
}

// Row is the outcome of one Scenario. The states are those after the
// foreground calls and one Resume with the faults off.
type Row struct {
	Scenario  string
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
	// Lost counts operations missing from the journal, or left open after
	// Resume without a review reason.
	Lost int
	// WronglyFailed counts operations marked failed although the server
	// performed them.
	WronglyFailed int
	// Problems lists every broken promise found, one line each; empty when
	// all held.
	Problems []string
	Elapsed  time.Duration
}

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// RunScenario starts an in-process fake server with sc's faults, submits ops
// operations one after the other through a client journaling under dir,
// turns the faults off, restarts the client, resumes once, and checks every
// operation against the server's side-effect counters and request log.
func RunScenario(ctx context.Context, sc Scenario, ops int, seed int64, dir string) (Row, error) {
	start := time.Now()
	row := Row{Scenario: sc.Name, Ops: ops}
	clk := idemtest.NewClock(epoch)
	srv, err := idemtest.NewServer(idemtest.WithClock(clk.Now), idemtest.WithSeed(seed), idemtest.WithProfile(sc.Profile))
	if err != nil {
		return row, fmt.Errorf("%s: %w", sc.Name, err)
	}
	defer srv.Close()
	path := filepath.Join(dir, strings.ReplaceAll(sc.Name, "/", "_")+".journal")
	opts := []idem.Option{
		idem.WithHTTPClient(srv.Client()),
		idem.WithClock(clk),
		idem.WithAttemptTimeout(matrixAttemptTimeout),
		idem.WithResultEndpoint(srv.URL + "/operations/{key}"),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", Credential)
			return nil
		}),
	}

	c, err := idem.Open(path, opts...)
	if err != nil {
		return row, err
	}
	for i := range ops {
		res, err := c.Submit(ctx, idem.Request{Key: Key(i), URL: srv.URL + OrdersPath, Body: Body(i)})
		var ierr *idem.Error
		switch {
		case res == nil:
			_ = c.Close()
			return row, fmt.Errorf("%s: Submit(%s): no result: %w", sc.Name, Key(i), err)
		case err != nil && !errors.As(err, &ierr):
			_ = c.Close()
			return row, fmt.Errorf("%s: Submit(%s): %w", sc.Name, Key(i), err)
		case !res.State.Terminal():
			row.HandedOff++
		}
	}
	if err := c.Close(); err != nil {
		return row, err
	}

	// The faults stop; a restarted process resumes what was left open.
	if err := srv.SetProfile(idemtest.Profile{}); err != nil {
		return row, fmt.Errorf("%s: %w", sc.Name, err)
	}
	if c, err = idem.Open(path, opts...); err != nil {
		return row, err
	}
	_, err = c.Resume(ctx)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return row, err
	}

	if err := row.check(ctx, path, srv); err != nil {
		return row, err
	}
	row.Elapsed = time.Since(start)
	return row, nil
}

// check fills in the outcome columns from the journal, read-only as the
// operator tool reads it, and from the server's counters and request log.
func (row *Row) check(ctx context.Context, path string, srv *idemtest.Server) error {
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
		effects := srv.Effects(Credential, key)
		row.Duplicates += max(0, effects-1)
		rec, err := store.Get(ctx, idem.DefaultScope, key)
		if errors.Is(err, journal.ErrNotFound) {
			row.Lost++
			problem("%s: not in the journal", key)
			continue
		}
		if err != nil {
			return err
		}
		if rec.BodySHA != BodySHA(i) {
			problem("%s: journaled body differs from the workload's", key)
		}
		switch {
		case rec.State == journal.StateSucceeded:
			row.Succeeded++
			if effects != 1 {
				problem("%s: succeeded with %d side effects", key, effects)
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
			problem("%s: left %s after Resume with no review reason", key, rec.State)
		}
		if effects > 1 {
			problem("%s: %d side effects", key, effects)
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
	if st.MaxEffectsPerKey > 1 {
		problem("max_effects_per_key = %d", st.MaxEffectsPerKey)
	}
	if st.Conflicts != 0 {
		problem("the server answered 422 (key reused with another body) %d time(s)", st.Conflicts)
	}
	return nil
}

// Markdown renders rows as a Markdown table.
func Markdown(rows []Row) string {
	var b strings.Builder
	b.WriteString("| fault | ops | handed off | succeeded | failed | unknown | review | attempts | queries | duplicates | lost | wrongly failed |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n",
			r.Scenario, r.Ops, r.HandedOff, r.Succeeded, r.Failed, r.Unknown, r.Review,
			r.Attempts, r.Queries, r.Duplicates, r.Lost, r.WronglyFailed)
	}
	return b.String()
}
