package idem

import (
	"net/http"
	"testing"
)

func TestFromCache(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"no header", http.Header{}, ""},
		{"Age 0: passed through", http.Header{"Age": {"0"}}, ""},
		{"Age", http.Header{"Age": {"12"}}, "Age: 12"},
		{"Age past uint64", http.Header{"Age": {"99999999999999999999999"}}, "Age: 99999999999999999999"},
		{"Age garbage", http.Header{"Age": {"soon"}}, ""},
		{"X-Cache miss", http.Header{"X-Cache": {"Miss from cloudfront"}}, ""},
		{"X-Cache error", http.Header{"X-Cache": {"Error from cloudfront"}}, ""},
		{"X-Cache hit", http.Header{"X-Cache": {"Hit from cloudfront"}}, "X-Cache: Hit from cloudfront"},
		{"X-Cache lower case", http.Header{"X-Cache": {"hit"}}, "X-Cache: hit"},
		{"X-Cache Fastly stale", http.Header{"X-Cache": {"HIT-STALE"}}, "X-Cache: HIT-STALE"},
		{"X-Cache second line", http.Header{"X-Cache": {"MISS", "HIT"}}, "X-Cache: HIT"},
		{"X-Cache empty entries", http.Header{"X-Cache": {" , ,"}}, ""},
		{"nginx bypass", http.Header{"X-Cache-Status": {"BYPASS"}}, ""},
		{"Varnish hit-for-pass: sent on to the origin", http.Header{"X-Cache": {"HIT-FOR-PASS"}}, ""},
		{"Varnish hitpass", http.Header{"X-Cache": {"hitpass"}}, ""},
		{"nginx expired: fetched afresh", http.Header{"X-Cache-Status": {"EXPIRED"}}, ""},
		{"nginx revalidated", http.Header{"X-Cache-Status": {"REVALIDATED"}}, "X-Cache-Status: REVALIDATED"},
		{"Cloudflare dynamic", http.Header{"Cf-Cache-Status": {"DYNAMIC"}}, ""},
		{"Cache-Status forwarded", http.Header{"Cache-Status": {`ExampleCache; fwd=uri-miss; stored`}}, ""},
		{"Cache-Status hit", http.Header{"Cache-Status": {`ExampleCache; hit`}}, "Cache-Status: ExampleCache; hit"},
		{"Cache-Status hit=?0", http.Header{"Cache-Status": {`ExampleCache; hit=?0`}}, ""},
		{"Cache-Status a cache named hit", http.Header{"Cache-Status": {`hit; fwd=miss`}}, ""},
		{"Cache-Status hit inside a quoted key", http.Header{"Cache-Status": {`C; fwd=miss; key="a; hit, b"`}}, ""},
		{"Cache-Status escaped quote", http.Header{"Cache-Status": {`"a\"; hit"; fwd=miss, B; hit`}}, `Cache-Status: "a\"; hit"; fwd=miss, B; hit`},
		{"Cache-Status trailing backslash", http.Header{"Cache-Status": {`"a\`}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromCache(tt.header); got != tt.want {
				t.Errorf("fromCache(%v) = %q; want %q", tt.header, got, tt.want)
			}
		})
	}
}

func FuzzFromCache(f *testing.F) {
	for _, s := range []string{`A; hit`, `"x\"; hit", B; fwd=miss`, `"\`, `;;,,`, "HIT", "TCP_MEM_HIT from x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, name := range []string{"Age", "Cache-Status", "X-Cache"} {
			got := fromCache(http.Header{name: {v}})
			if len(got) > len(name)+2+64 {
				t.Fatalf("fromCache(%s: %q) = %q: over its bound", name, v, got)
			}
		}
	})
}
