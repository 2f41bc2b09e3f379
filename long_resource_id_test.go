package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Azure Resource Manager names what a PUT created by its full path, a
// resource id of 300 bytes and more for a nested resource in a resource
// group with a long name (names go to 90 bytes and more each; the answer
// is {"id":"/subscriptions/…/resourceGroups/…/providers/…",…}), and
// Event Grid's ResourceWriteSuccess event carries the same id as its
// subject; AWS ARNs go to 2048 bytes. Cut to the 255 bytes of an
// operator's id, the id a call returned named no resource, and a webhook
// naming the whole id was refused as too long: the id is kept whole up to
// the longest a provider documents.
func TestLongProviderResourceIDIsKeptWhole(t *testing.T) {
	id := "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/" +
		"rg-payments-order-fulfilment-production-westeurope-shared-platform-001" +
		"/providers/Microsoft.ApiManagement/service/apim-payments-order-fulfilment-prod-weu-001" +
		"/apis/order-fulfilment-v2/operations/create-order-with-stock-reservation/policies/policy"
	require.Greater(t, len(id), 300)
	v := newVendor(t, shape{status: http.StatusCreated, body: `{"id":"` + id + `","name":"policy","type":"Microsoft.ApiManagement/service/apis/operations/policies"}`})
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, id, res.ResourceID, "the id the server gave")
	require.Equal(t, 1, v.posts())

	res, err = c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: id, Source: "eventgrid", EventID: "831e1650-001e-001b-66ab-eeb76e069631"})
	require.NoError(t, err, "the event names the resource the call made")
	require.Equal(t, id, res.ResourceID)
	require.Empty(t, res.Review, "no conflict: the same resource")
}
