package idem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// ctOrder is an Order as commercetools answers it (abridged), created
// from a cart in a state of the project's own workflow
// (OrderFromCartDraft's "state", since the 2018-07-18 release "Create
// Order from Cart: be able to set state",
// docs.commercetools.com/api/releases/2018-07-18-create-order-from-cart-be-able-to-set-state):
// its own orderState and paymentState, and "state", a Reference to that
// State, {"typeId":"state","id":…}: a link to another resource, not a
// status.
func ctOrder(id, number string) string {
	return fmt.Sprintf(`{"id":%q,"version":1,"orderNumber":%q,"orderState":"Open","paymentState":"Pending","state":{"typeId":"state","id":"9a0c0c5e-0000-4000-8000-00000000000a"},"totalPrice":{"type":"centPrecision","currencyCode":"EUR","centAmount":4200,"fractionDigits":2},"lineItems":[],"origin":"Customer","createdAt":"2026-11-29T12:00:00.000Z"}`, id, number)
}

const ctOrderNumber = "ord-2026-000731"

var ctOrderDraft = `{"cart":{"typeId":"cart","id":"3b8e2c1a-0000-4000-8000-000000000007"},"version":3,"orderNumber":"` + ctOrderNumber + `","state":{"typeId":"state","key":"order-received"}}`

// An order created in a workflow state of the project's own settles by
// the 201 that answers it (or, its answer lost, by the lookup by order
// number): "state" holding a Reference to a State is no status. It was
// read as a body that proves nothing, so a plain 201 was asked about
// again and again and the order left processing, then for a person once
// its key window passed, though the server had answered it.
func TestCommercetoolsOrderInAWorkflowStateSettles(t *testing.T) {
	for _, lose := range []int{0, 1} {
		t.Run(fmt.Sprintf("answers lost=%d", lose), func(t *testing.T) {
			ct := &ctResources{lookup: "/shop/orders/order-number=", field: "orderNumber", typeID: "order", render: ctOrder, lose: lose}
			srv := ct.start(t)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithResultEndpoint("/shop/orders/order-number={key}"))

			res, err := c.Submit(t.Context(), idem.Request{Key: ctOrderNumber, URL: srv.URL + "/shop/orders", Body: []byte(ctOrderDraft)})
			requireOutcome(t, res, err, idem.StateSucceeded, nil, ct.made(ctOrderNumber), "")
			ct.requireOne(t, ctOrderNumber, ctOrderDraft, 1, lose)
		})
	}
}

// commercetools answers a Create Order from Cart that it goes on to
// complete with 500 ("If a server-side problem occurs, indicated by a
// 500 Internal Server Error HTTP response, the Order creation may still
// successfully complete after the error is returned. If you receive
// this error, you should verify the status of the Order by querying a
// unique identifier supplied during the creation request, such as the
// Order number": commercetools-sdk-java-v2's ByProjectKeyOrdersPost,
// from the API reference). The order shows up by its number only later
// (90 s here): the call asks and asks again, never resends nor fails,
// and Resume settles it by the lookup once it shows; one create.
func TestCommercetoolsOrderCompletedAfterA500(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	shows := epoch.Add(90 * time.Second)
	ct := &ctResources{lookup: "/shop/orders/order-number=", field: "orderNumber", typeID: "order", render: ctOrder, serverError: true,
		hidden: func() bool { return clock.Now().Before(shows) }}
	srv := ct.start(t)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithResultEndpoint("/shop/orders/order-number={key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: ctOrderNumber, URL: srv.URL + "/shop/orders", Body: []byte(ctOrderDraft)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Empty(t, res.Review)
	ct.mu.Lock()
	asked := ct.queries
	ct.mu.Unlock()
	require.Positive(t, asked, "lookups by order number")

	clock.Advance(shows.Sub(clock.Now()))
	requireResumeSettlesKey(t, c, ctOrderNumber, ct.made(ctOrderNumber))
	ct.requireOne(t, ctOrderNumber, ctOrderDraft, 1, asked+1)
}
