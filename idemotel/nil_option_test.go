package idemotel_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemotel"
)

// TestNilOptionsKeepTheDefaults: WithClock(nil) and a nil Option panicked
// inside New (a method call on a nil interface), taking down the service
// at start-up where idem.New and admin.NewHandler skip them; New keeps
// the defaults instead, as it does for a nil provider.
func TestNilOptionsKeepTheDefaults(t *testing.T) {
	var inst *idemotel.Instrumentation
	var err error
	require.NotPanics(t, func() {
		inst, err = idemotel.New(nil, idemotel.WithClock(nil), idemotel.WithMeterProvider(nil), idemotel.WithTracerProvider(nil))
	})
	require.NoError(t, err)
	require.NotNil(t, inst)
	require.NotNil(t, inst.Hooks().Call)
}
