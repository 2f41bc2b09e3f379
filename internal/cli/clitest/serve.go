package clitest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
)

// Serve opens the journal at path in a Client, as the running service
// would (holding its lock), and serves the admin handler on 127.0.0.1
// until the test ends. The handler's URL is what -url takes.
func Serve(t testing.TB, path string) string {
	t.Helper()
	c, err := idem.Open(path)
	if err != nil {
		t.Fatalf("idem.Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/idem/", http.StripPrefix("/idem", admin.NewHandler(c)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/idem/"
}
