package idem_test

import (
	"net/http"
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

// dropConnection closes the connection of w's request with no answer:
// an answer lost after the server took the request.
func dropConnection(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}
