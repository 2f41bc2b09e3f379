package admin_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
)

// An operator pastes the URL they call, secrets and all, where an endpoint
// name goes (modelled: an API key passed in the query string, a link with
// a fragment, credentials before a host given without its scheme). No
// endpoint name holds a query, a fragment or userinfo (the Client names
// an endpoint without them, as "METHOD URL", the URL absolute), so the
// removal is a 400 that does not quote it; a 404 saying which endpoint is unknown echoed the key into the
// answer, the CLI's error and whatever logs either. The journal keeps
// the endpoint.
func TestKeyIgnoringRemoveRefusesNamesWithSecrets(t *testing.T) {
	f := keyIgnoringFixture(t)
	for _, endpoint := range []string{
		"POST https://api.solidgate.example/api/v1/charge?api_key=sk_live_hunter2",
		"POST https://api.solidgate.example/api/v1/charge#hunter2",
		"POST https://api.solidgate.example/api/v1/charge?#hunter2",
		"POST shop:hunter2@api.solidgate.example/api/v1/charge",
		// No method before the URL, a tab for the space, a URL
		// beginning "//": each passed the checks above unread.
		"https://api.solidgate.example/api/v1/charge?api_key=sk_live_hunter2",
		"POST\\thttps://shop:hunter2@api.solidgate.example/api/v1/charge",
		"POST //shop:hunter2@api.solidgate.example/api/v1/charge",
	} {
		var e struct{ Error admin.Error }
		require.Equal(t, http.StatusBadRequest, f.do(http.MethodPost, "/key-ignoring/remove", `{"endpoint":"`+endpoint+`"}`, &e), endpoint)
		require.Equal(t, "bad_request", e.Error.Code, endpoint)
		require.NotContains(t, e.Error.Message, "hunter2", endpoint)
	}
	kept, err := f.store.KeyIgnoringEndpoints(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{charge}, kept, "journal: a refused removal removed it")
}
