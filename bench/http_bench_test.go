package bench

import (
	"fmt"
	"testing"
)

// BenchmarkLoneCaller is target 1: one caller, happy path, fsync on.
// idem's Submit against the hand-written Update → POST → Update and a
// bare net/http POST. Compare p50-µs.
func BenchmarkLoneCaller(b *testing.B) {
	interleave(b, []contender{idemC, baselineC, bareC}, func(b *testing.B, c contender) {
		withClient(b, c, func(cl client) { runOps(b, cl, servers.plain+"/v1/orders", 1) })
	})
}

// BenchmarkThroughput is target 2: 1, 8 and 64 concurrent callers, every
// client with a pool of 64 idle connections per host. Compare ops/s, and
// cpu-µs/op (this process only: the server runs in its own). The
// hand-written Update → POST → Update with fsync off shows the CPU floor of
// journaling each operation twice in bbolt.
func BenchmarkThroughput(b *testing.B) {
	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			interleave(b, []contender{idemC, idemNoSyncC, bareC, retryC, baselineNoSyncC, floorC}, func(b *testing.B, c contender) {
				withClient(b, c, func(cl client) { runOps(b, cl, servers.plain+"/v1/orders", callers) })
			})
		})
	}
}

// BenchmarkServer checks that the server is not what the other benchmarks
// measure: bare net/http and idem against the plain handler and against
// idemtest's fake server, at 64 callers.
func BenchmarkServer(b *testing.B) {
	for _, srv := range []struct{ name, url *string }{{ptr("plain"), &servers.plain}, {ptr("fake"), &servers.fake}} {
		b.Run("server="+*srv.name, func(b *testing.B) {
			interleave(b, []contender{bareC, idemNoSyncC}, func(b *testing.B, c contender) {
				withClient(b, c, func(cl client) { runOps(b, cl, *srv.url+"/v1/orders", 64) })
			})
		})
	}
}

func ptr[T any](v T) *T { return &v }
