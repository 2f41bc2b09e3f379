package journal

import (
	"reflect"
	"testing"
	"time"
)

// validateChange compares resolutions with sameResolution, which skips
// reflection when either is nil: it must answer as reflect.DeepEqual.
func TestSameResolutionIsDeepEqual(t *testing.T) {
	at := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	m := &Resolution{By: "ops", Reason: "refunded", At: at, From: StateProcessing}
	for _, tt := range []struct{ a, b *Resolution }{
		{nil, nil},
		{m, nil},
		{nil, m},
		{m, m},
		{m, &Resolution{By: "ops", Reason: "refunded", At: at, From: StateProcessing}},
		{m, &Resolution{By: "ops", Reason: "other", At: at, From: StateProcessing}},
		{&Resolution{}, nil},
	} {
		if got, want := sameResolution(tt.a, tt.b), reflect.DeepEqual(tt.a, tt.b); got != want {
			t.Errorf("sameResolution(%v, %v) = %v; reflect.DeepEqual says %v", tt.a, tt.b, got, want)
		}
	}
}
