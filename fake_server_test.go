package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// newServer is idemtest's fake server with opts, closed when the test
// ends.
func newServer(t testing.TB, opts ...idemtest.Option) *idemtest.Server {
	t.Helper()
	srv, err := idemtest.NewServer(opts...)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}
