package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
)

// escape is an OSC 52 sequence: a terminal that honours it puts its text
// in the operator's clipboard, and an escape of any kind can rewrite what
// the operator reads above it.
const escape = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\a"

// hostileAdmin answers every request the way -url pointed at the wrong
// service, or at one an attacker controls, may: the admin handler's JSON
// shapes holding escapes, and an error message of 1 MiB.
func hostileAdmin(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		op := admin.Operation{Scope: "default", Key: "k", Method: "POST", URL: "https://api.example.com/orders",
			State: "failed" + escape, Created: now, Updated: now,
			Confirmations: []admin.Confirmation{{Source: "webhook", EventID: "evt_1", State: "succeeded" + escape, At: now, Effect: "conflicted"}}}
		var v any
		switch {
		case strings.HasSuffix(r.URL.Path, "/operations"):
			v = admin.Page{Operations: []*admin.Operation{&op}}
		case strings.HasSuffix(r.URL.Path, "/operation"):
			v = op
		default:
			w.WriteHeader(http.StatusInternalServerError)
			v = map[string]any{"error": admin.Error{Status: 500, Code: "internal", Message: escape + strings.Repeat("x", 1<<20)}}
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/idem/"
}

// What the idem command prints of an admin handler's answer reaches the
// operator's terminal: the state of a listed operation and of a
// confirmation, and the handler's error message, were printed as sent,
// escapes and all, the message whole.
func TestRemoteAnswerTextIsCleanedForTheTerminal(t *testing.T) {
	url := hostileAdmin(t)
	for _, args := range [][]string{{"list"}, {"show", "k"}, {"stats"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, _ := runIdem(t, append([]string{"-url", url}, args...)...)
			require.NotContains(t, out+errOut, "\x1b", "stdout %q\nstderr %.300q", out, errOut)
			require.Less(t, len(errOut), 4<<10, "stderr: %d bytes", len(errOut))
		})
	}
}
