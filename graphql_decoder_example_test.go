package idem_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/idemkit/idem"
)

// graphQLMutation is the part of a GraphQL answer a decoder of one
// mutation reads: the mutation's payload in "data" (its resource and its
// "userErrors", the mutation's own refusals), and the top-level
// "errors" of the request as a whole (the GraphQL spec's response
// format, which answers them 200 OK: a throttle, an internal error).
type graphQLMutation struct {
	Data map[string]struct {
		Refund *struct {
			ID string `json:"id"`
		} `json:"refund"`
		// refundCreate's are Shopify's plain UserError: field and
		// message, no code (the inventory mutations' typed errors add
		// one).
		UserErrors []struct {
			Message string `json:"message"`
		} `json:"userErrors"`
	} `json:"data"`
	Errors []struct {
		Message    string `json:"message"`
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	} `json:"errors"`
}

// decodeRefundCreate reads Shopify's refundCreate, whose idempotency key
// is the @idempotent directive's in the document
// (https://shopify.dev/docs/api/usage/idempotent-requests), as idem needs
// a GraphQL mutation read:
//   - the refund made settles it, beside errors or not (a repeat of the
//     key after the mutation ran answers the original's result: the
//     changelog "Adding idempotency for inventory adjustments and refund
//     mutations");
//   - a userError is the mutation refused: failed. One of them, "This
//     request is currently in progress, please try again"
//     (IDEMPOTENCY_CONCURRENT_REQUEST where a mutation's errors carry a
//     code; refundCreate's carry only the message), is the key's request
//     still running, and may yet refund: idem reads those words in a
//     failed 2xx as the key in flight, waited on after a send of ours
//     that may have executed, flagged ReviewKeyInUse to a first attempt
//     (the request running may be another's that used the key). Do not
//     map it to processing yourself: that says the request running is
//     ours, and a first attempt would settle with another's refund.
//     Other refusals made nothing:
//     IDEMPOTENCY_PREVIOUS_ATTEMPT_FAILED says the key's earlier request
//     failed, and IDEMPOTENCY_KEY_PARAMETER_MISMATCH that the key was
//     used with other variables (idem sends the same bytes on every
//     attempt, so another request's: this one made nothing). Codes from
//     https://shopify.dev/docs/api/admin-graphql/unstable/enums/InventoryCountCancelUserErrorCode;
//   - a top-level error (THROTTLED, which refuses the document before it
//     runs, an internal error, a code added later) proves nothing: idem
//     resends the same bytes after its backoff, and the key makes the
//     resend safe.
func decodeRefundCreate(a *idem.Answer) (idem.Outcome, error) {
	var v graphQLMutation
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, fmt.Errorf("graphql: %w", err)
	}
	p, ok := v.Data["refundCreate"]
	switch {
	case ok && p.Refund != nil && p.Refund.ID != "":
		// Made, whatever else failed: GraphQL answers the data it could
		// resolve beside errors of other fields
		// (https://spec.graphql.org/October2021/#sec-Response-Format).
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: p.Refund.ID}, nil
	case len(v.Errors) > 0:
		return idem.Outcome{}, fmt.Errorf("graphql: %s %q settles nothing", v.Errors[0].Extensions.Code, v.Errors[0].Message)
	case !ok:
		return idem.Outcome{}, errors.New("graphql: no refundCreate in data")
	case len(p.UserErrors) > 0:
		return idem.Outcome{State: idem.StateFailed, Reason: p.UserErrors[0].Message}, nil
	}
	return idem.Outcome{}, errors.New("graphql: refundCreate made no refund")
}

// A GraphQL API answers 200 OK whatever became of a mutation, and
// DecodeJSON settles none of it (no "state" or "id" at the top level):
// give a Decoder that reads the mutation's payload. With the key in the
// document (Shopify's @idempotent(key: "…"), Braintree's apiRequestKey
// in the input), send it with WithKeyInBody. The mapping that matters:
// the key's request still running is processing, never failed; a
// userError fails (idem itself reads "this request is currently in
// progress" as the key in flight); a top-level error (THROTTLED) proves
// nothing.
func ExampleWithDecoder_graphql() {
	_ = []idem.Option{idem.WithKeyInBody(), idem.WithDecoder(decodeRefundCreate)}
	for _, body := range []string{
		`{"data":{"refundCreate":{"refund":{"id":"gid://shopify/Refund/1"},"userErrors":[]}}}`,
		`{"data":{"refundCreate":{"refund":null,"userErrors":[{"field":null,` +
			`"message":"This request is currently in progress, please try again."}]}}}`,
		`{"data":{"refundCreate":{"refund":null,"userErrors":[{"field":null,` +
			`"message":"A previous request with this idempotency key failed. Retry with a new idempotency key."}]}}}`,
		`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}],` +
			`"extensions":{"cost":{"requestedQueryCost":752,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":666,"restoreRate":50.0}}}}`,
	} {
		out, err := decodeRefundCreate(&idem.Answer{Key: "k", StatusCode: http.StatusOK, Body: []byte(body)})
		if err != nil {
			fmt.Println("proves nothing:", err)
			continue
		}
		fmt.Printf("%s %q %q\n", out.State, out.ResourceID, out.Reason)
	}
	// Output:
	// succeeded "gid://shopify/Refund/1" ""
	// failed "" "This request is currently in progress, please try again."
	// failed "" "A previous request with this idempotency key failed. Retry with a new idempotency key."
	// proves nothing: graphql: THROTTLED "Throttled" settles nothing
}
