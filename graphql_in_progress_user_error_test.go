package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// idempotentMutations is a GraphQL endpoint whose mutation takes its
// idempotency key in the document, as Shopify's Admin API takes
// @idempotent(key: "…") on refundCreate and its inventory mutations
// (https://shopify.dev/docs/api/usage/idempotent-requests;
// https://shopify.dev/changelog/adding-idempotency-for-inventory-adjustments-and-refund-mutations),
// and answers everything 200 OK, as GraphQL does:
//   - a key whose mutation ran is answered with the original's result;
//   - a key whose mutation still runs, with the userError
//     IDEMPOTENCY_CONCURRENT_REQUEST, "This request is currently in
//     progress, please try again."
//     (https://shopify.dev/docs/api/admin-graphql/unstable/enums/InventoryCountCancelUserErrorCode);
//   - a throttled document is refused before it runs with a top-level
//     error, extensions.code THROTTLED, and the cost in the answer's
//     extensions (https://community.shopify.com/t/throttled/254776).
//
// faults script the answers, one a request: "504" starts the refund and
// answers as a CDN whose wait for the origin ran out, the refund left
// running for the next `running` requests; "lost" makes the refund and
// drops the connection; "internal" makes it if it is not made and
// answers an internal error; "throttled"; "" serves.
type idempotentMutations struct {
	running int
	// concurrent, when set, is answered in place of shopifyConcurrent.
	concurrent string

	mu      sync.Mutex
	faults  []string
	runs    map[string]int    // key: requests still to see the mutation running
	results map[string]string // key: the mutation's result, replayed
	refunds int
	posts   []string
}

var idempotentDirective = regexp.MustCompile(`@idempotent\(key: "([^"]+)"\)`)

const (
	shopifyRefund     = `{"data":{"refundCreate":{"refund":{"id":"gid://shopify/Refund/1"},"userErrors":[]}},` + shopifyCost + `}`
	shopifyCost       = `"extensions":{"cost":{"requestedQueryCost":10,"actualQueryCost":10,"throttleStatus":{"maximumAvailable":2000.0,"currentlyAvailable":1990,"restoreRate":100.0}}}`
	shopifyConcurrent = `{"data":{"refundCreate":{"refund":null,"userErrors":[{"field":null,"code":"IDEMPOTENCY_CONCURRENT_REQUEST",` +
		`"message":"This request is currently in progress, please try again."}]}},` + shopifyCost + `}`
	shopifyThrottled = `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}],` +
		`"extensions":{"cost":{"requestedQueryCost":752,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":666,"restoreRate":50.0}}}}`
)

func (m *idempotentMutations) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var doc struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(b, &doc)
	key := ""
	if k := idempotentDirective.FindStringSubmatch(doc.Query); k != nil {
		key = k[1]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.posts = append(m.posts, string(b))
	fault := ""
	if len(m.faults) > 0 {
		fault, m.faults = m.faults[0], m.faults[1:]
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case fault == "throttled":
		_, _ = io.WriteString(w, shopifyThrottled)
		return
	case fault == "internal":
		if m.results[key] == "" {
			m.refunds++
			m.results[key] = shopifyRefund
		}
		_, _ = io.WriteString(w, shopifyInternal)
		return
	case m.runs[key] > 0:
		m.runs[key]--
		body := shopifyConcurrent
		if m.concurrent != "" {
			body = m.concurrent
		}
		_, _ = io.WriteString(w, body)
		return
	case m.results[key] != "":
		_, _ = io.WriteString(w, m.results[key])
		return
	}
	m.refunds++
	m.results[key] = shopifyRefund
	switch fault {
	case "504":
		m.runs[key] = m.running
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = io.WriteString(w, "<html><body><h1>504 Gateway Time-out</h1></body></html>")
	case "lost":
		dropConnection(w)
	default:
		_, _ = io.WriteString(w, shopifyRefund)
	}
}

// refundDocument is refundCreate under key k, its key in the directive.
func refundDocument(k string) []byte {
	return []byte(`{"query":"mutation { refundCreate(input: {orderId: \"gid://shopify/Order/1\", refundLineItems: [{lineItemId: \"gid://shopify/LineItem/1\", quantity: 1}]}) ` +
		`@idempotent(key: \"` + k + `\") { refund { id } userErrors { field message } } }"}`)
}

// A GraphQL mutation whose key's request still runs is answered 200 OK
// with a userError saying so (Shopify's IDEMPOTENCY_CONCURRENT_REQUEST).
// A decoder that reads userErrors as the mutation's refusals, as
// GraphQL's schemas present them, reads it as failed: after a CDN's 504
// whose refund went on running, ErrFailed for a refund that was made,
// which invites it again under a new key; and to a first attempt, which
// a copy of ours (a mesh's retry) may have preceded, the same. The words
// say the key's request is in progress, as a 4xx's do (Adyen's 704,
// PayPal's PREVIOUS_REQUEST_IN_PROGRESS): in flight, waited on after a
// send that may have executed, for a person otherwise; never failed.
// With the decoder of ExampleWithDecoder_graphql, processing. Lost
// answers and THROTTLED settle on the replay. One refund each, every
// post the same bytes.
func TestGraphQLMutationInProgressIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name    string
		faults  []string
		running int
		earlier bool // a copy of ours holds the key before the first attempt
		resume  bool // the call ends unknown; Resume settles it
		state   idem.State
		kinds   []error
		review  string
		posts   int
	}{
		{name: "504 while it runs, userErrors read as failures", faults: []string{"504"}, running: 1,
			state: idem.StateSucceeded, posts: 3},
		{name: "504, running past the call, Resume", faults: []string{"504"}, running: idem.DefaultMaxAttempts - 1,
			resume: true, state: idem.StateSucceeded, posts: idem.DefaultMaxAttempts + 1},
		{name: "a copy of ours runs before the first attempt", earlier: true,
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},
		{name: "answer lost, then throttled", faults: []string{"lost", "throttled"},
			state: idem.StateSucceeded, posts: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &idempotentMutations{faults: tt.faults, running: tt.running, runs: map[string]int{}, results: map[string]string{}}
			if tt.earlier {
				m.refunds, m.runs["k"], m.results["k"] = 1, 1, shopifyRefund
			}
			c, res, err := submitRefund(t, m, decodeRefundCreate)
			require.NotErrorIs(t, err, idem.ErrFailed)
			if tt.resume {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				sum, err := c.Resume(t.Context())
				require.NoError(t, err)
				require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
			} else {
				requireOutcome(t, res, err, tt.state, tt.kinds, resourceIf(tt.state), tt.review)
			}
			requireJournaled(t, c, tt.state, tt.review)
			m.requireOneRefund(t, tt.posts)
		})
	}
}

// submitRefund submits refundDocument("k") to m, served on 127.0.0.1,
// by a client at default settings but for the key in the body and
// decode.
func submitRefund(t *testing.T, m *idempotentMutations, decode idem.Decoder) (*idem.Client, *idem.Result, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decode))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/admin/api/2026-01/graphql.json",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: refundDocument("k")})
	return c, res, err
}

// requireOneRefund asserts that m made one refund and was posted the
// same document posts times.
func (m *idempotentMutations) requireOneRefund(t *testing.T, posts int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Equal(t, 1, m.refunds, "refunds")
	require.Equal(t, slices.Repeat([]string{string(refundDocument("k"))}, posts), m.posts, "posts")
}

// requireJournaled asserts that c's journal holds key "k" in state,
// flagged with review ("" for none).
func requireJournaled(t *testing.T, c *idem.Client, state idem.State, review string) {
	t.Helper()
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, state, op.State)
	require.Equal(t, review, op.Review)
}

// resourceIf is the refund a succeeded operation names.
func resourceIf(s idem.State) string {
	if s == idem.StateSucceeded {
		return "gid://shopify/Refund/1"
	}
	return ""
}

// shopifyConcurrentNoCode is IDEMPOTENCY_CONCURRENT_REQUEST as
// refundCreate can answer it: its payload's userErrors are the plain
// UserError, which has a field and a message and no code
// (https://shopify.dev/docs/api/admin-graphql/latest/payloads/RefundCreatePayload),
// so nothing in the answer says "idempotency": only the message says
// the request is in progress.
const shopifyConcurrentNoCode = `{"data":{"refundCreate":{"refund":null,"userErrors":[{"field":null,` +
	`"message":"This request is currently in progress, please try again."}]}},` + shopifyCost + `}`

// refundCreate's own userErrors carry no code, so the in-progress
// refusal is known by its message alone: "This request is currently in
// progress" is the key's request, as the coded one is. Read as failed
// (the example's decoder reads every userError so), it was
// ErrFailed for a refund the 504's request went on to make.
func TestGraphQLMutationInProgressWithoutCodeIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name    string
		earlier bool // a copy of ours holds the key before the first attempt
		state   idem.State
		kinds   []error
		review  string
		posts   int
	}{
		{name: "504 while it runs, userErrors read as failures", state: idem.StateSucceeded, posts: 3},
		{name: "a copy of ours runs before the first attempt", earlier: true,
			state: idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview}, review: idem.ReviewKeyInUse, posts: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &idempotentMutations{running: 1, concurrent: shopifyConcurrentNoCode, runs: map[string]int{}, results: map[string]string{}}
			if tt.earlier {
				m.refunds, m.runs["k"], m.results["k"] = 1, 1, shopifyRefund
			} else {
				m.faults = []string{"504"}
			}
			c, res, err := submitRefund(t, m, decodeRefundCreate)
			require.NotErrorIs(t, err, idem.ErrFailed)
			requireOutcome(t, res, err, tt.state, tt.kinds, resourceIf(tt.state), tt.review)
			requireJournaled(t, c, tt.state, tt.review)
			m.requireOneRefund(t, tt.posts)
		})
	}
}
