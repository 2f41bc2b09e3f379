// Package bench holds idem's comparative benchmarks and the duplicates
// harness (cmd/dupes). It is a separate module so that the comparison
// libraries (github.com/hashicorp/go-retryablehttp) never enter idem's own
// go.mod; `go test ./...` at the repository root does not descend into it.
//
// Run it explicitly, from this directory; BENCHMARKS.md at the repository
// root has the commands and the figures:
//
//	go test -run='^$' -bench=. -benchtime=1s -timeout=60m | tee bench.txt
//	go run ./cmd/benchsum < bench.txt
//	go test -run='^$' -bench=Resume -cold -rounds=3 | go run ./cmd/benchsum
//	go run ./cmd/dupes
//
// Each comparison runs interleaved, -rounds times (default 5): round R
// runs every contender once, as sub-benchmark round=R/NAME. The first run
// of BenchmarkResume builds a journal of 1,000,000 settled operations
// (about 70 s, 1.35 GB) and caches it under os.TempDir()/idem-bench.
//
// The HTTP benchmarks talk to a server in a child process (the test binary
// re-executed with IDEMBENCH_ROLE=server), so that the CPU time measured
// in the benchmark process is the client's alone.
package bench
