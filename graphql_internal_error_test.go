package idem_test

import (
	"encoding/json"
	"testing"

	"github.com/idemkit/idem"
)

// shopifyInternal is the GraphQL Admin API's internal error, answered in
// place of a 500 with the request's id
// (https://community.shopify.com/c/shopify-apis-and-sdks/760-internal-errors-when-calling-shopify-graphql-api/m-p/1130424:
// 760 of 56000 productUpdate calls); INTERNAL_SERVER_ERROR is also
// Apollo Server's code for an unspecified error.
const shopifyInternal = `{"errors":[{"message":"Internal error. Looks like something went wrong on our end.\nRequest ID: 3221c58f-3446-4843-a452-a517787121c6 (include this in support requests).",` +
	`"extensions":{"code":"INTERNAL_SERVER_ERROR","requestId":"3221c58f-3446-4843-a452-a517787121c6"}}]}`

// decodeErrorsFail reads a GraphQL answer as GraphQL clients commonly
// do: any top-level error is the request's failure (Braintree's Node
// SDK's GraphQLClient reads every one as a validation error), and
// otherwise as decodeRefundCreate does.
func decodeErrorsFail(a *idem.Answer) (idem.Outcome, error) {
	var v graphQLMutation
	if err := json.Unmarshal(a.Body, &v); err == nil && len(v.Errors) > 0 {
		return idem.Outcome{State: idem.StateFailed, Reason: v.Errors[0].Message}, nil
	}
	return decodeRefundCreate(a)
}

// A GraphQL API answers its internal errors 200 OK (Shopify's
// INTERNAL_SERVER_ERROR, in place of a 500), and an internal error may
// follow the mutation's commit: "the ultimate state of the request is
// uncertain", as Braintree's apiRequestKey doc says of its INTERNAL
// error. A decoder that reads any top-level error as the request's
// failure made it ErrFailed for a refund that was made, inviting a
// second. It is a 500 in an envelope: it may have executed, and the
// resend's replay settles it. One refund, every post the same bytes.
func TestGraphQLInternalErrorIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		decode idem.Decoder
		faults []string
		posts  int
	}{
		{name: "top-level errors read as failures", decode: decodeErrorsFail, faults: []string{"internal"}, posts: 2},
		{name: "the example's decoder", decode: decodeRefundCreate, faults: []string{"internal"}, posts: 2},
		{name: "answer lost, then an internal error, errors read as failures", decode: decodeErrorsFail,
			faults: []string{"lost", "internal"}, posts: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &idempotentMutations{faults: tt.faults, runs: map[string]int{}, results: map[string]string{}}
			_, res, err := submitRefund(t, m, tt.decode)
			requireOutcome(t, res, err, idem.StateSucceeded, nil, "gid://shopify/Refund/1", "")
			m.requireOneRefund(t, tt.posts)
		})
	}
}
