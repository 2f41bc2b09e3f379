package idem_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// braintreeCharges is Braintree's GraphQL API charging a payment method
// under At-Most-Once Processing: chargePaymentMethod with an
// apiRequestKey in its input, a repeat of the key answered with the
// original request's current state
// (https://graphql.braintreepayments.com/integration_guides/idempotency/),
// and everything answered 200 OK, errors in a top-level "errors" whose
// extensions carry an errorClass and a legacyCode (Braintree's Python
// SDK, braintree/graphql_client.py, reads errorClass: VALIDATION the
// mutation's own refusal, INTERNAL its ServerError, SERVICE_AVAILABILITY
// its DownForMaintenanceError, RESOURCE_LIMIT its TooManyRequestsError).
//
// faults script the answers, one a request: "lost" charges and drops the
// connection; "INTERNAL" and "SERVICE_AVAILABILITY" charge, if the key
// has not, and answer that error class, as a server that failed after
// its commit does; "refused" refuses an uncharged key with a VALIDATION
// error, legacyCode 91518 (the SDKs' ErrorCodes'
// Transaction.PaymentMethodTokenIsInvalid), and charges nothing; ""
// serves.
type braintreeCharges struct {
	mu      sync.Mutex
	faults  []string
	results map[string]string // apiRequestKey: the charge's answer, replayed
	charges int
	posts   []string
}

const braintreeCharged = `{"data":{"chargePaymentMethod":{"transaction":{"id":"dHJhbnNhY3Rpb25fYWJj","status":"SUBMITTED_FOR_SETTLEMENT"}}},` +
	`"extensions":{"requestId":"5f2b9c1e-7d3a-4b8e-9f61-2c4d8a7e1b30"}}`

// braintreeError is Braintree's answer of one error of class, the
// mutation's payload null: the shape of its GraphQL errors (message,
// extensions.errorClass, extensions.legacyCode, a JSON string or null;
// the request's id in the top-level extensions).
func braintreeError(class, legacyCode, message string) string {
	return `{"data":{"chargePaymentMethod":null},"errors":[{"message":"` + message + `","locations":[{"line":1,"column":60}],` +
		`"path":["chargePaymentMethod"],"extensions":{"errorClass":"` + class + `","legacyCode":` + legacyCode + `}}],` +
		`"extensions":{"requestId":"0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"}}`
}

func (b *braintreeCharges) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var doc struct {
		Variables struct {
			Input struct {
				APIRequestKey string `json:"apiRequestKey"`
			} `json:"input"`
		} `json:"variables"`
	}
	_ = json.Unmarshal(body, &doc)
	key := doc.Variables.Input.APIRequestKey
	b.mu.Lock()
	defer b.mu.Unlock()
	b.posts = append(b.posts, string(body))
	fault := ""
	if len(b.faults) > 0 {
		fault, b.faults = b.faults[0], b.faults[1:]
	}
	w.Header().Set("Content-Type", "application/json")
	if fault == "refused" && b.results[key] == "" {
		_, _ = io.WriteString(w, braintreeError("VALIDATION", `"91518"`, "Payment method token is invalid."))
		return
	}
	if b.results[key] == "" {
		b.charges++
		b.results[key] = braintreeCharged
	}
	switch fault {
	case "lost":
		dropConnection(w)
	case "INTERNAL":
		_, _ = io.WriteString(w, braintreeError(fault, "null", "An unexpected error occurred"))
	case "SERVICE_AVAILABILITY":
		_, _ = io.WriteString(w, braintreeError(fault, "null", "Service temporarily unavailable"))
	default:
		_, _ = io.WriteString(w, b.results[key])
	}
}

// chargeDocument is chargePaymentMethod under key k, the key the
// input's apiRequestKey.
func chargeDocument(k string) []byte {
	return []byte(`{"query":"mutation Charge($input: ChargePaymentMethodInput!) { chargePaymentMethod(input: $input) { transaction { id status } } }",` +
		`"variables":{"input":{"paymentMethodId":"cGF5bWVudG1ldGhvZF9jY19hYmM","transaction":{"amount":"10.00"},"apiRequestKey":"` + k + `"}}}`)
}

// decodeChargePaymentMethod reads chargePaymentMethod as Braintree's
// Node SDK's GraphQLClient reads an answer: any top-level error is a
// validation error, the charge's refusal (getValidationErrors reads
// every one so, whatever its errorClass).
func decodeChargePaymentMethod(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Data struct {
			Charge *struct {
				Transaction *struct {
					ID string `json:"id"`
				} `json:"transaction"`
			} `json:"chargePaymentMethod"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch {
	case v.Data.Charge != nil && v.Data.Charge.Transaction != nil:
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data.Charge.Transaction.ID}, nil
	case len(v.Errors) > 0:
		return idem.Outcome{State: idem.StateFailed, Reason: v.Errors[0].Message}, nil
	}
	return idem.Outcome{}, errors.New("no transaction and no error")
}

// Braintree answers its internal errors 200 OK with errorClass INTERNAL,
// not Shopify's and Apollo's extensions.code INTERNAL_SERVER_ERROR, and
// its SDKs raise them as the ServerError of a 500; SERVICE_AVAILABILITY
// as DownForMaintenanceError, which Braintree's exceptions reference
// says is "raised when a request times out" (so the charge may have gone
// on). Either may follow the charge's commit, and the Node SDK reads any
// error as the charge's refusal: to the first attempt, ErrFailed for a
// charge made, inviting a second under a new key. Like a 500, each is
// resent under the same apiRequestKey, whose replay settles it. One
// charge, every post the same bytes.
func TestBraintreeUncertainErrorClassIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		faults []string
		posts  int
	}{
		{name: "INTERNAL after the charge", faults: []string{"INTERNAL"}, posts: 2},
		{name: "SERVICE_AVAILABILITY after the charge", faults: []string{"SERVICE_AVAILABILITY"}, posts: 2},
		{name: "answer lost, then INTERNAL to the resend", faults: []string{"lost", "INTERNAL"}, posts: 3},
		{name: "answer lost, then SERVICE_AVAILABILITY to the resend", faults: []string{"lost", "SERVICE_AVAILABILITY"}, posts: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &braintreeCharges{faults: tt.faults, results: map[string]string{}}
			c, res, err := submitCharge(t, b)
			requireOutcome(t, res, err, idem.StateSucceeded, nil, "dHJhbnNhY3Rpb25fYWJj", "")
			requireJournaled(t, c, idem.StateSucceeded, "")
			b.requireCharges(t, 1, tt.posts)
		})
	}
}

// The rule reads Braintree's classes that may follow the work done, not
// its refusals: a VALIDATION error to a first attempt charged nothing,
// and fails it, once.
func TestBraintreeValidationErrorFails(t *testing.T) {
	b := &braintreeCharges{faults: []string{"refused"}, results: map[string]string{}}
	c, res, err := submitCharge(t, b)
	requireOutcome(t, res, err, idem.StateFailed, []error{idem.ErrFailed}, "", "")
	require.Equal(t, "Payment method token is invalid.", res.Reason)
	requireJournaled(t, c, idem.StateFailed, "")
	b.requireCharges(t, 0, 1)
}

// submitCharge submits chargeDocument("k") to b, served on 127.0.0.1,
// by a client at default settings but for the key in the body and
// decodeChargePaymentMethod.
func submitCharge(t *testing.T, b *braintreeCharges) (*idem.Client, *idem.Result, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodeChargePaymentMethod))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/graphql",
		Header: http.Header{"Content-Type": {"application/json"}, "Braintree-Version": {"2019-01-01"}}, Body: chargeDocument("k")})
	return c, res, err
}

// requireCharges asserts that b charged charges times and was posted the
// same document posts times.
func (b *braintreeCharges) requireCharges(t *testing.T, charges, posts int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Equal(t, charges, b.charges, "charges")
	require.Equal(t, slices.Repeat([]string{string(chargeDocument("k"))}, posts), b.posts, "posts")
}
