// Command dupes counts orders per business intent for three clients under
// the same seeded faults and the same crashes, and prints a Markdown table:
//
//   - naive: hashicorp/go-retryablehttp retrying POSTs (connection errors,
//     timeouts, 5xx) with no idempotency key. The fake server refuses a POST
//     without a key (400), so the naive client stamps a fresh random key on
//     every HTTP attempt: the server has nothing to de-duplicate on, which is
//     what "no key" means.
//   - memory-key: the same retrying client, but one random key per intent,
//     kept in a map in memory: the same key on every retry within a process,
//     a new key after a restart.
//   - idem: idem.Open with fsync on; Resume at start-up, Run in the
//     background, the key journaled before the first send.
//
// Each client runs in a child process (this binary, re-executed) that the
// parent SIGKILLs at fixed points of the workload (after 25%, 50% and 75% of
// the intents are confirmed) and then restarts, against one idemtest fake
// server in the parent, reset to the same seeded fault profile for each run.
// The intents come from the parent, which plays the application's source of
// work in two ways: "redelivers" (a queue: an intent not confirmed before a
// crash is handed to the restarted process again) and "at most once" (an
// intent handed to a process that crashes is gone, unless the client
// itself recorded it).
//
// Orders are counted by the server: every submit it logged is tied to its
// intent by the body's digest (each intent has its own body), and the
// orders of an intent are the side effects of all the keys it was sent
// with.
//
//	go run ./cmd/dupes [-intents 500] [-seed 1] [-kills 3]
package main

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemkit/idem/idemtest"
)

var (
	intents     = flag.Int("intents", 500, "business intents (orders) in the workload")
	seed        = flag.Int64("seed", 1, "seed of the fake server's faults (the first one)")
	seeds       = flag.Int("seeds", 5, "runs, with seeds seed, seed+1, …; the table adds them up")
	kills       = flag.Int("kills", 3, "SIGKILLs of the client process during the workload")
	concurrency = flag.Int("concurrency", 16, "intents each client process works on at once")
	rate        = flag.Float64("rate", 0.05, "probability of each fault (drop after commit, 500 after commit, delay) per submit")
	child       = flag.String("child", "", "internal: run as the client process of this kind")
	serverURL   = flag.String("server", "", "internal: the fake server's URL")
	journalPath = flag.String("journal", "", "internal: idem's journal")
)

// The fault profile: the answer is lost after the server committed the
// order (dropped connection, 500, or held past the client's timeout).
const (
	attemptTimeout = 300 * time.Millisecond
	faultDelay     = 2 * time.Second
	scope          = "Bearer acct_dupes" // the fake server scopes keys by Authorization
)

func intentID(i int) string { return fmt.Sprintf("intent-%04d", i) }

func intentBody(id string) []byte {
	return []byte(fmt.Sprintf(`{"intent":%q,"amount":1999,"currency":"EUR"}`, id))
}

func main() {
	flag.Parse()
	if *child != "" {
		if err := runChild(*child, *serverURL, *journalPath); err != nil {
			fmt.Fprintln(os.Stderr, "dupes child:", err)
			os.Exit(1)
		}
		return
	}
	if err := runParent(); err != nil {
		fmt.Fprintln(os.Stderr, "dupes:", err)
		os.Exit(1)
	}
}

type row struct {
	client, source                         string
	intents, orders, dupes, lost, open     int
	confirmed, submits, killed, dupIntents int
	elapsed                                time.Duration
	faults                                 string // submits by fault/status, for the log
}

func runParent() error {
	profile := idemtest.Profile{
		Rates: map[idemtest.FaultKind]float64{
			idemtest.DropAfterCommit:  *rate,
			idemtest.ErrorAfterCommit: *rate,
			idemtest.DelayResponse:    *rate,
		},
		Delay: faultDelay,
	}
	dir, err := os.MkdirTemp("", "idem-dupes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	type id struct{ kind, source string }
	var order []id
	total := map[id]*row{}
	for s := *seed; s < *seed+int64(*seeds); s++ {
		srv, err := idemtest.NewServer(idemtest.WithProfile(profile), idemtest.WithSeed(s))
		if err != nil {
			return fmt.Errorf("seed %d: %w", s, err)
		}
		for _, source := range []string{"redelivers", "at most once"} {
			for _, kind := range []string{"naive", "memory-key", "idem"} {
				srv.Reset()
				name := fmt.Sprintf("%s-%s-%d.journal", kind, strings.ReplaceAll(source, " ", "-"), s)
				r, err := runScenario(srv, kind, source, filepath.Join(dir, name))
				if err != nil {
					srv.Close()
					return fmt.Errorf("%s, %s, seed %d: %w", kind, source, s, err)
				}
				fmt.Fprintf(os.Stderr, "seed %d, %s, %s: %d orders, %d duplicates, %d lost, %d open, %v; submits by fault/status: %s\n",
					s, kind, source, r.orders, r.dupes, r.lost, r.open, r.elapsed.Round(time.Millisecond), r.faults)
				k := id{kind, source}
				t, ok := total[k]
				if !ok {
					order = append(order, k)
					t = &row{client: kind, source: source}
					total[k] = t
				}
				t.intents += r.intents
				t.orders += r.orders
				t.dupes += r.dupes
				t.dupIntents += r.dupIntents
				t.lost += r.lost
				t.open += r.open
				t.killed += r.killed
				t.submits += r.submits
			}
		}
		srv.Close()
	}
	fmt.Printf("Seeds %d to %d, %d intents each, %d at a time. Faults per submit: %.0f%% drop after commit, %.0f%% 500 after commit, %.0f%% answer held past the %v client timeout. %d SIGKILLs of the client process per run.\n\n",
		*seed, *seed+int64(*seeds)-1, *intents, *concurrency, *rate*100, *rate*100, *rate*100, attemptTimeout, *kills)
	fmt.Println("| client | source of work | intents | orders created | duplicates | intents duplicated | lost | open in journal | kills | submits sent |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, k := range order {
		r := total[k]
		fmt.Printf("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d |\n",
			r.client, r.source, r.intents, r.orders, r.dupes, r.dupIntents, r.lost, r.open, r.killed, r.submits)
	}
	return nil
}

// runScenario runs one client over the workload, killing its process
// *kills times, and counts the orders.
func runScenario(srv *idemtest.Server, kind, source, journal string) (row, error) {
	start := time.Now()
	n := *intents
	delivered := make([]bool, n)
	confirmed := make([]bool, n)
	nConfirmed := 0
	open := map[string]bool{}
	index := map[string]int{}
	for i := range n {
		index[intentID(i)] = i
	}
	killed := 0
	for phase := 0; phase <= *kills; phase++ {
		var work []string
		for i := range n {
			if confirmed[i] || (source == "at most once" && delivered[i]) {
				continue
			}
			work = append(work, intentID(i))
		}
		last := phase == *kills
		threshold := n * (phase + 1) / (*kills + 1)
		exe, err := os.Executable()
		if err != nil {
			return row{}, err
		}
		cmd := exec.Command(exe, "-child", kind, "-server", srv.URL, "-journal", journal,
			"-concurrency", fmt.Sprint(*concurrency))
		cmd.Stderr = os.Stderr
		cmd.Stdin = strings.NewReader(strings.Join(work, "\n") + "\n")
		out, err := cmd.StdoutPipe()
		if err != nil {
			return row{}, err
		}
		if err := cmd.Start(); err != nil {
			return row{}, err
		}
		clear(open)
		sc := bufio.NewScanner(out)
		sentKill := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			i, ok := index[f[1]]
			if !ok {
				continue
			}
			switch f[0] {
			case "start":
				delivered[i] = true
			case "ack":
				delivered[i] = true
				if !confirmed[i] {
					confirmed[i] = true
					nConfirmed++
				}
			case "open":
				open[f[1]] = true
			}
			if !last && !sentKill && nConfirmed >= threshold {
				_ = cmd.Process.Kill() // SIGKILL: no clean-up in the child
				sentKill = true
				killed++
			}
		}
		_, _ = io.Copy(io.Discard, out)
		err = cmd.Wait()
		if !sentKill && err != nil {
			return row{}, fmt.Errorf("client process: %w", err)
		}
	}
	return count(srv, kind, source, n, open, nConfirmed, killed, time.Since(start)), nil
}

// count ties every submit the server logged to its intent by the body's
// digest and adds up the orders of each intent.
func count(srv *idemtest.Server, kind, source string, n int, open map[string]bool, confirmed, killed int, elapsed time.Duration) row {
	bySHA := map[[32]byte]int{}
	for i := range n {
		bySHA[sha256.Sum256(intentBody(intentID(i)))] = i
	}
	keys := make([]map[string]bool, n)
	r := row{client: kind, source: source, intents: n, confirmed: confirmed, killed: killed, elapsed: elapsed}
	faults := map[string]int{}
	for _, req := range srv.Requests() {
		if req.Method != "POST" {
			continue
		}
		faults[fmt.Sprintf("%s/%d", req.Fault, req.Status)]++
		r.submits++
		i, ok := bySHA[req.BodySHA256]
		if !ok || req.Key == "" {
			continue
		}
		if keys[i] == nil {
			keys[i] = map[string]bool{}
		}
		keys[i][req.Key] = true
	}
	r.faults = fmt.Sprint(faults)
	for i := range n {
		orders := 0
		for k := range keys[i] {
			orders += srv.Effects(scope, k)
		}
		r.orders += orders
		if orders > 1 {
			r.dupes += orders - 1
			r.dupIntents++
		}
		if open[intentID(i)] {
			r.open++ // recorded: idem keeps checking it
		} else if orders == 0 {
			r.lost++ // no order, and no client remembers it
		}
	}
	return r
}
