package idemtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// TestNilOptionIsIgnored: NewServer promises an error, not a panic,
// for a bad option, and journal.Open skips a nil Option; NewServer
// dereferenced it and panicked (an option slice built conditionally, with
// a nil left in it, is enough).
func TestNilOptionIsIgnored(t *testing.T) {
	var srv *idemtest.Server
	var err error
	require.NotPanics(t, func() { srv, err = idemtest.NewServer(nil, idemtest.WithSeed(1)) })
	require.NoError(t, err)
	srv.Close()
}
