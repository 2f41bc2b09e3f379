// Command benchsum reads the output of the bench module's benchmarks
// (go test -bench) and prints, in Markdown, the median of every metric over
// the rounds, and the ratios the targets are judged on, each the median of
// the ratios measured within one round (so both sides ran back to back).
//
//	go test -run='^$' -bench=. | tee bench.txt
//	go run ./cmd/benchsum < bench.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A ratio is num/den of one metric, paired by round.
type ratio struct {
	num, den, metric, note string
}

func tp(c, a, b, m, note string) ratio {
	return ratio{"BenchmarkThroughput/callers=" + c + "/" + a, "BenchmarkThroughput/callers=" + c + "/" + b, m, note}
}

var ratios = []ratio{
	{"BenchmarkLoneCaller/idem", "BenchmarkLoneCaller/update-post-update", "p50-µs", "target ≤ 1.10"},
	{"BenchmarkLoneCaller/idem", "BenchmarkLoneCaller/update-post-update", "ns/op", ""},
	{"BenchmarkLoneCaller/idem", "BenchmarkLoneCaller/net-http", "p50-µs", ""},
	{"BenchmarkLoneCaller/idem", "BenchmarkLoneCaller/update-post-update", "cpu-µs/op", ""},
	tp("1", "idem", "net-http", "ops/s", ""),
	tp("8", "idem", "net-http", "ops/s", ""),
	tp("64", "idem", "net-http", "ops/s", "target ≥ 0.50"),
	tp("1", "idem-nosync", "net-http", "ops/s", ""),
	tp("8", "idem-nosync", "net-http", "ops/s", ""),
	tp("64", "idem-nosync", "net-http", "ops/s", ""),
	tp("64", "retryablehttp", "net-http", "ops/s", ""),
	tp("1", "idem-nosync", "retryablehttp", "cpu-µs/op", "target ≤ 1.50"),
	tp("8", "idem-nosync", "retryablehttp", "cpu-µs/op", "target ≤ 1.50"),
	tp("64", "idem-nosync", "retryablehttp", "cpu-µs/op", "target ≤ 1.50"),
	tp("1", "idem-nosync", "update-post-update-nosync", "cpu-µs/op", ""),
	tp("8", "idem-nosync", "update-post-update-nosync", "cpu-µs/op", ""),
	tp("64", "idem-nosync", "update-post-update-nosync", "cpu-µs/op", ""),
	tp("1", "update-post-update-nosync", "retryablehttp", "cpu-µs/op", ""),
	tp("64", "update-post-update-nosync", "retryablehttp", "cpu-µs/op", ""),
	tp("1", "idem", "retryablehttp", "cpu-µs/op", ""),
	tp("64", "idem", "retryablehttp", "cpu-µs/op", ""),
	tp("1", "idem-nosync", "retryablehttp", "allocs/op", ""),
	tp("1", "idem-nosync", "retryablehttp", "B/op", ""),
	{"BenchmarkResume/settled=1000000/enumerate", "BenchmarkResume/settled=10000/enumerate", "startup-ms", "target ≤ 1.50"},
	{"BenchmarkResume/settled=1000000/enumerate", "BenchmarkResume/settled=10000/enumerate", "enum-ms", ""},
	{"BenchmarkResume/settled=1000000/enumerate", "BenchmarkResume/settled=10000/enumerate", "scan-ms", ""},
	{"BenchmarkResume/settled=1000000/cold", "BenchmarkResume/settled=10000/cold", "startup-ms", ""},
	{"BenchmarkResume/settled=1000000/drive", "BenchmarkResume/settled=10000/drive", "ops/s", ""},
	{"BenchmarkInFlight/idem", "BenchmarkInFlight/net-http", "heap-B/inflight", ""},
	{"BenchmarkInFlight/retryablehttp", "BenchmarkInFlight/net-http", "heap-B/inflight", ""},
	// Issue 14's targets.
	tp("64", "idem", "net-http", "ops/s", "issue 14 target ≥ 0.45"),
	{"BenchmarkJournalAlone/journal-alone", "BenchmarkJournalAlone/net-http", "ops/s", "issue 14 target ≥ 0.60"},
	{"BenchmarkJournalAlone/journal-alone-v4keys", "BenchmarkJournalAlone/net-http", "ops/s", "caller's random keys"},
	tp("64", "idem-nosync", "retryablehttp", "cpu-µs/op", "issue 14 target ≤ 2.50"),
	tp("64", "idem-nosync", "idem-nojournal", "cpu-µs/op", "issue 14 target ≤ 1.30"),
	tp("64", "idem-nosync", "idem-nojournal", "gc-cpu-µs/op", ""),
	{"BenchmarkRealisticLatency/idem", "BenchmarkRealisticLatency/net-http", "ops/s", "issue 14 target ≥ 0.90"},
	{"BenchmarkRealisticLatency/idem", "BenchmarkRealisticLatency/net-http", "p99-µs", ""},
	{"BenchmarkRealisticLatency/idem-nosync", "BenchmarkRealisticLatency/net-http", "ops/s", "what fsync costs there"},
	{"BenchmarkServer/server=fake/net-http", "BenchmarkServer/server=plain/net-http", "ops/s", ""},
	{"BenchmarkServer/server=fake/idem-nosync", "BenchmarkServer/server=plain/idem-nosync", "ops/s", ""},
}

var (
	roundRE = regexp.MustCompile(`/round=(\d+)`)
	procsRE = regexp.MustCompile(`-\d+$`)
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchsum:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	// name -> metric -> round -> value
	data := map[string]map[string]map[int]float64{}
	var names []string
	var metricOrder = map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// Each run of a test binary starts with a "goos:" line and numbers its
	// rounds from 1: rounds of later runs are rounds of their own, not
	// overwrites of the first run's (ratios still pair within a round).
	runs := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "goos:" {
			runs++
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		full := procsRE.ReplaceAllString(f[0], "")
		round := 1
		if m := roundRE.FindStringSubmatch(full); m != nil {
			round, _ = strconv.Atoi(m[1])
			full = roundRE.ReplaceAllString(full, "")
		}
		round += runs << 20
		if data[full] == nil {
			data[full] = map[string]map[int]float64{}
			names = append(names, full)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			unit := f[i+1]
			if data[full][unit] == nil {
				data[full][unit] = map[int]float64{}
				metricOrder[full] = append(metricOrder[full], unit)
			}
			data[full][unit][round] = v
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintln(out, "| benchmark | rounds | medians |")
	fmt.Fprintln(out, "|---|---:|---|")
	for _, n := range names {
		var parts []string
		rounds := 0
		for _, unit := range metricOrder[n] {
			vals := values(data[n][unit])
			rounds = max(rounds, len(vals))
			parts = append(parts, format(median(vals))+" "+unit)
		}
		fmt.Fprintf(out, "| %s | %d | %s |\n", strings.TrimPrefix(n, "Benchmark"), rounds, strings.Join(parts, ", "))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| ratio (same round, median over rounds) | metric | median | per round | note |")
	fmt.Fprintln(out, "|---|---|---:|---|---|")
	for _, r := range ratios {
		num, den := data[r.num][r.metric], data[r.den][r.metric]
		if num == nil || den == nil {
			continue
		}
		var per []float64
		for round, v := range num {
			if d, ok := den[round]; ok && d != 0 {
				per = append(per, v/d)
			}
		}
		if len(per) == 0 {
			continue
		}
		shown := slices.Clone(per)
		slices.Sort(shown)
		var s []string
		for _, v := range shown {
			s = append(s, fmt.Sprintf("%.2f", v))
		}
		fmt.Fprintf(out, "| %s ÷ %s | %s | **%.2f** | %s | %s |\n",
			strings.TrimPrefix(r.num, "Benchmark"), strings.TrimPrefix(r.den, "Benchmark"), r.metric, median(per), strings.Join(s, ", "), r.note)
	}
	return nil
}

func values(m map[int]float64) []float64 {
	var v []float64
	for _, x := range m {
		v = append(v, x)
	}
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func format(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
