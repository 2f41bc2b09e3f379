package idemotel_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// A metrics backend keeps one series per attribute set: the key (one per
// operation), the scope (one per tenant) or the URL (one per resource id
// in a path) as a metric attribute would grow the series without bound.
// Fifty operations, ten of them refused, make series for the few values
// of the attributes the package documents, and no more.
func TestMetricAttributesTakeFewValues(t *testing.T) {
	srv := outcomeServer(t)
	tel := newTelemetry(t, idemtest.NewClock(epoch))
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = fmt.Sprintf("ok-%d", i)
		if i%5 == 0 {
			keys[i] = fmt.Sprintf("reject-%d", i)
		}
	}
	submitAll(t, tel.inst.Hooks(), srv.URL+"/orders", keys...)

	allowed := map[string]bool{"idem.outcome": true, "idem.attempt.kind": true, "idem.attempt.status_class": true,
		"idem.call.kind": true, "idem.state": true}
	for name, pts := range tel.metrics(t) {
		require.LessOrEqual(t, len(pts), 4, "%s: %d series: %v", name, len(pts), pts)
		for set := range pts {
			for _, kv := range strings.Split(set, ",") {
				if kv == "" {
					continue
				}
				k, _, _ := strings.Cut(kv, "=")
				require.True(t, allowed[k], "%s carries %s", name, kv)
			}
		}
	}
}
