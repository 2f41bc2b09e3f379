package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
)

// The handler mounted under /idem/ of a service's mux, behind the
// service's own operator authentication (here a stand-in that checks a
// static token).
func ExampleNewHandler() {
	api, _ := idemtest.NewServer()
	defer api.Close()
	dir, _ := os.MkdirTemp("", "idem-example-")
	defer os.RemoveAll(dir)
	c, _ := idem.Open(filepath.Join(dir, "idem.journal"), idem.WithHTTPClient(api.Client()))
	defer c.Close()
	_, _ = c.Submit(context.Background(), idem.Request{Key: "order-1", URL: api.URL + "/orders", Body: []byte(`{"amount":1}`)})

	requireOperator := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer operator-token" {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/idem/", http.StripPrefix("/idem", requireOperator(admin.NewHandler(c))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/idem/stats", nil)
	req.Header.Set("Authorization", "Bearer operator-token")
	resp, err := srv.Client().Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var st admin.Stats
	_ = json.NewDecoder(resp.Body).Decode(&st)
	fmt.Println(resp.StatusCode, "succeeded:", st.ByState["succeeded"], "open:", st.Open, "total:", st.Total)
	// Output: 200 succeeded: 1 open: 0 total: 1
}
