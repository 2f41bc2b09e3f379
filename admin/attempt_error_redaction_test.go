package admin_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/journal"
)

// net/http's transport errors quote the request URL (Post "https://…":
// connection reset by peer); a record journaled before the client refused
// secret query parameters served its API key in the timeline's error while
// the url field beside it was redacted.
func TestTimelineErrorRedactsTheURLItQuotes(t *testing.T) {
	f := newFixture(t)
	body := []byte(`{}`)
	now := f.clock.Now()
	u := f.srv.URL + "/orders?api_key=" + plantedCredential + "&region=eu"
	_, err := f.store.Create(context.Background(), &journal.Record{
		Scope: idem.DefaultScope, Key: "legacy", Method: http.MethodPost, URL: u,
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown, Created: now, Updated: now,
		Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: now, Wrote: true, Done: true,
			Err: `Post "` + u + `": read tcp 127.0.0.1:4242: connection reset by peer`}},
	})
	require.NoError(t, err)
	var op admin.Operation
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/operation?key=legacy", "", &op))
	require.Len(t, op.Timeline, 1)
	require.Contains(t, op.Timeline[0].Error, "connection reset by peer")
	var page admin.Page
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/operations?timeline=true", "", &page))
}
