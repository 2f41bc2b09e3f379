package idem_test

import (
	"cmp"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A result endpoint served by a GraphQL engine answers 200 OK whatever
// became of the query, its errors in a top-level "errors" list
// (https://spec.graphql.org/October2021/#sec-Response-Format). An error
// about the query itself, a field or a type the schema lacks, or the
// credential's access, says nothing of the order: with the client order
// id in the body, a resend on its word places a filled order again.
// Hasura answered "field '<table>' not found in type: 'query_root'" to
// every fifth valid query while its metadata reloaded
// (hasura/graphql-engine#7366, in Hasura's envelope, code
// validation-failed): its "not found" was taken for the endpoint's "no
// such order", and once the result lag had passed Resume sent the order
// again. So did PostgREST's "column … does not exist" and "relation …
// does not exist", PostgreSQL's words for a column or a table the query
// names. Each shape here is asked again, never followed by a resend.
func TestQueryGraphQLErrorAboutTheQueryIsNoNotFound(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int // 200 unless set
		body   string
	}{
		{name: "hasura's field not found in query_root",
			body: `{"errors":[{"extensions":{"path":"$.selectionSet.orders","code":"validation-failed"},` +
				`"message":"field 'orders' not found in type: 'query_root'"}]}`},
		// MONEI/Shopify-api-node#519: Shopify Admin's undefinedField.
		{name: "shopify's field that doesn't exist on QueryRoot",
			body: `{"errors":[{"message":"Field 'orders' doesn't exist on type 'QueryRoot'","locations":[{"line":2,"column":7}],` +
				`"path":["query","orders"],"extensions":{"code":"undefinedField","typeName":"QueryRoot","fieldName":"orders"}}]}`},
		// https://shopify.dev/docs/api/usage/access-scopes: a token
		// without the scope is answered 200 with ACCESS_DENIED.
		{name: "shopify's access denied",
			body: `{"errors":[{"message":"Access denied for orders field. Required access: ` + "`read_orders`" + ` access scope.",` +
				`"locations":[{"line":2,"column":3}],"path":["orders"],"extensions":{"code":"ACCESS_DENIED",` +
				`"documentation":"https://shopify.dev/api/usage/access-scopes"}}],"data":null}`},
		// https://shopify.dev/docs/api/usage/rate-limits
		{name: "shopify's throttled",
			body: `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}]}`},
		// A NOT_FOUND code with no words (Apollo Server's extensions.code):
		// which thing is missing it does not say, so not the order.
		{name: "a bare NOT_FOUND code", body: `{"errors":[{"extensions":{"code":"NOT_FOUND"}}],"data":{"order":null}}`},
		// Apollo's automatic persisted queries, the way a GraphQL query
		// goes by GET (apollographql/apollo-server#982): a hash the
		// server has not stored yet is answered so, and says nothing of
		// the order.
		{name: "apollo's persisted query not found",
			body: `{"errors":[{"message":"PersistedQueryNotFound","extensions":{"code":"PERSISTED_QUERY_NOT_FOUND"}}]}`},
		// Hasura's own words for a type its schema lacks (getTyInfoVE).
		{name: "no such type in the schema",
			body: `{"errors":[{"message":"no such type exists in the schema: 'orders_bool_exp'","extensions":{"code":"validation-failed"}}]}`},
		// A result endpoint served by PostgREST answers PostgreSQL's
		// errors in its envelope
		// (https://docs.postgrest.org/en/latest/references/errors.html):
		// a column renamed under the query, or its table missing, is
		// the query's fault, not the order's absence.
		{name: "postgrest's column that does not exist", status: http.StatusBadRequest,
			body: `{"code":"42703","details":null,"hint":null,"message":"column orders.client_order_id does not exist"}`},
		{name: "postgrest's relation that does not exist", status: http.StatusNotFound,
			body: `{"hint":null,"details":null,"code":"42P01","message":"relation \"api.orders\" does not exist"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requireQueryAnswerNeverResent(t, shape{status: cmp.Or(tt.status, http.StatusOK),
				header: http.Header{"Content-Type": {"application/json"}}, body: tt.body})
		})
	}
}

// The GraphQL endpoint's own "not found" of the order, a null where the
// order would be with no error (Shopify's, Saleor's and commercetools'
// answer to an id they hold nothing for) or an error whose words say the
// order was not found, is the endpoint's "no such order": once the
// result lag has passed, the order that was never placed is sent again
// under its client order id.
func TestQueryGraphQLOrderNotFoundLetsTheResendGo(t *testing.T) {
	for _, tt := range []struct{ name, body string }{
		{name: "a null order", body: `{"data":{"order":null}}`},
		{name: "an order not found", body: `{"errors":[{"message":"Order not found","path":["order"],` +
			`"extensions":{"code":"NOT_FOUND"}}],"data":{"order":null}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answer := shape{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: tt.body}
			x := &spotExchange{lostBefore: true, queryFails: slices.Repeat([]shape{answer}, 4*idem.DefaultMaxAttempts)}
			c, clock, base := x.start(t)

			_, err := c.Submit(t.Context(), marketBuy(base))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			clock.Advance(idem.DefaultResultLag)
			requireResumeSettles(t, c, "1")
			x.requireOneOrder(t, 2)
		})
	}
}
