package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// ctResources models one resource type of the commercetools HTTP API
// whose drafts carry a user-defined identifier unique in the project,
// the operation's key: Payments' "key" (POST /{projectKey}/payments,
// read back by GET /{projectKey}/payments/key={key},
// docs.commercetools.com/api/projects/payments) or Orders' "orderNumber"
// (Create Order from Cart, POST /{projectKey}/orders, read back by GET
// /{projectKey}/orders/order-number={orderNumber},
// docs.commercetools.com/api/projects/orders). A create whose
// identifier the project holds is refused 400 with the error response
// of docs.commercetools.com/api/errors: DuplicateField, "A duplicate
// value $duplicateValue exists for field $field.", or, when conflicting
// is set, DuplicateFieldWithConflictingResource, which names the
// resource holding the value in conflictingResource. An identifier not
// found is 404 ResourceNotFound.
type ctResources struct {
	lookup string                      // the lookup's path before the identifier ("/shop/payments/key=")
	field  string                      // the draft's member holding the identifier
	typeID string                      // the resource's typeId, as a Reference names it
	render func(id, key string) string // the resource as the API answers it

	lose        int         // how many of the first creates lose their answer (connection dropped after the resource is made)
	unavailable bool        // the first create, once made, is answered 503 (an upstream reset, as Envoy reports it)
	conflicting bool        // refuse a held identifier with DuplicateFieldWithConflictingResource
	serverError bool        // the first create, once made, is answered 500 General
	hidden      func() bool // while it reports true, a lookup does not find what the first create made

	mu      sync.Mutex
	byKey   map[string]string // identifier → resource id
	creates []string          // each create's body
	queries int
}

// start serves ct on a new test server.
func (ct *ctResources) start(t testing.TB) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(ct.serve))
	t.Cleanup(srv.Close)
	return srv
}

func (ct *ctResources) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.byKey == nil {
		ct.byKey = map[string]string{}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if r.Method == http.MethodGet {
		ct.queries++
		key, _ := strings.CutPrefix(r.URL.Path, ct.lookup)
		id, ok := ct.byKey[key]
		if !ok || ct.hidden != nil && ct.hidden() {
			w.WriteHeader(http.StatusNotFound)
			msg := fmt.Sprintf("The Resource with key '%s' was not found.", key)
			_, _ = fmt.Fprintf(w, `{"statusCode":404,"message":%q,"errors":[{"code":"ResourceNotFound","message":%q}]}`, msg, msg)
			return
		}
		_, _ = io.WriteString(w, ct.render(id, key))
		return
	}
	ct.creates = append(ct.creates, string(body))
	key := ctIdentifier(body, ct.field)
	if id, ok := ct.byKey[key]; ok {
		w.WriteHeader(http.StatusBadRequest)
		if ct.conflicting {
			msg := fmt.Sprintf(`A duplicate value '"%s"' exists for field '%s' on %s %s.`, key, ct.field, ct.typeID, id)
			_, _ = fmt.Fprintf(w, `{"statusCode":400,"message":%q,"errors":[{"code":"DuplicateFieldWithConflictingResource","message":%q,"field":%q,"duplicateValue":%q,"conflictingResource":{"typeId":%q,"id":%q}}]}`,
				msg, msg, ct.field, key, ct.typeID, id)
			return
		}
		msg := fmt.Sprintf(`A duplicate value '"%s"' exists for field '%s'.`, key, ct.field)
		_, _ = fmt.Fprintf(w, `{"statusCode":400,"message":%q,"errors":[{"code":"DuplicateField","message":%q,"field":%q,"duplicateValue":%q}]}`, msg, msg, ct.field, key)
		return
	}
	id := fmt.Sprintf("8f0c7a4e-3b1d-4c5e-9a2f-%012d", len(ct.byKey)+1)
	ct.byKey[key] = id
	switch {
	case ct.serverError && len(ct.creates) == 1:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"statusCode":500,"message":"Write operations are temporarily not possible.","errors":[{"code":"General","message":"Write operations are temporarily not possible."}]}`)
	case ct.unavailable && len(ct.creates) == 1:
		w.Header().Set("Content-Type", "text/plain")
		podReset(w)
	case len(ct.creates) <= ct.lose:
		dropConnection(w)
	default:
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, ct.render(id, key))
	}
}

// made is the id of the resource made under key, if any.
func (ct *ctResources) made(key string) string {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.byKey[key]
}

// requireOne asserts that the project holds one resource, under key,
// that every create carried draft, n of them, and that it was looked up
// lookups times.
func (ct *ctResources) requireOne(t testing.TB, key, draft string, n, lookups int) {
	t.Helper()
	ct.mu.Lock()
	defer ct.mu.Unlock()
	require.Equal(t, lookups, ct.queries, "lookups")
	require.Len(t, ct.byKey, 1, "resources made")
	require.Contains(t, ct.byKey, key, "resources made")
	require.Len(t, ct.creates, n, "creates")
	for i, b := range ct.creates {
		require.Equalf(t, draft, b, "create %d: the draft, with its key", i+1)
	}
}

// ctIdentifier is the draft's string member field.
func ctIdentifier(draft []byte, field string) string {
	var m map[string]any
	_ = json.Unmarshal(draft, &m)
	s, _ := m[field].(string)
	return s
}
