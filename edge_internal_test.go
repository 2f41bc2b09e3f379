package idem

import (
	"net/http"
	"testing"
)

func TestEdgeUnforwarded(t *testing.T) {
	cf := http.Header{"Server": {"cloudflare"}, "Cf-Ray": {"8f3e9500a5207d3-MIA"}}
	tests := []struct {
		name   string
		status int
		header http.Header
		want   bool
	}{
		{"521 web server is down", 521, cf, true},
		{"523 origin is unreachable", 523, cf, true},
		{"525 SSL handshake failed", 525, cf, true},
		{"520 the origin answered something", 520, cf, false},
		{"522 may follow a request the origin took", 522, cf, false},
		{"524 the origin was working on it", 524, cf, false},
		{"502 a gateway's, either way", 502, cf, false},
		{"521 without CF-Ray: not Cloudflare's edge", 521, http.Header{"Server": {"cloudflare"}}, false},
		{"521 from another server", 521, http.Header{"Server": {"nginx"}, "Cf-Ray": {"x"}}, false},
		{"521 with no headers", 521, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := edgeUnforwarded(tc.status, tc.header); got != tc.want {
				t.Errorf("edgeUnforwarded(%d, %v) = %t; want %t", tc.status, tc.header, got, tc.want)
			}
		})
	}
}
