package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
)

// TestNilClockKeepsTheWallClock: WithClock(nil) panicked inside NewHandler
// (a method value of a nil interface), taking down the service that
// mounted it; it leaves the default clock instead.
func TestNilClockKeepsTheWallClock(t *testing.T) {
	f := newFixture(t)
	var h http.Handler
	require.NotPanics(t, func() { h = admin.NewHandler(f.client, admin.WithClock(nil)) })
	require.NotNil(t, h)
}
