package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
)

// TestNilOptionSkipped: NewHandler applied a nil Option, panicking in the
// service that mounts the handler; it is skipped, as idem.New skips one.
func TestNilOptionSkipped(t *testing.T) {
	f := newFixture(t)
	var opt admin.Option
	var h http.Handler
	require.NotPanics(t, func() { h = admin.NewHandler(f.client, opt) })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// TestNilClientAnswersUnavailable: a handler made for a nil *idem.Client
// (Open's result mounted after its error was ignored) panicked on
// /health and answered the other endpoints 500 "internal". Every endpoint
// now answers 503 saying the handler has no Client.
func TestNilClientAnswersUnavailable(t *testing.T) {
	var c *idem.Client
	h := admin.NewHandler(c)
	for _, target := range []string{"/health", "/stats", "/operations", "/operation?key=k"} {
		rec := httptest.NewRecorder()
		require.NotPanics(t, func() { h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil)) }, target)
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, "GET %s: %s", target, rec.Body.String())
		var body struct{ Error admin.Error }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), target)
		require.Equal(t, "unavailable", body.Error.Code, target)
		require.Contains(t, body.Error.Message, "nil *idem.Client", target)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/resolve", strings.NewReader(`{"key":"k","state":"failed","reason":"r","by":"b"}`))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
}
