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

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// commercetools models the commercetools HTTP API's payments
// (docs.commercetools.com/api/projects/payments): POST
// /{projectKey}/payments creates a Payment from a PaymentDraft whose
// user-defined "key" is unique in the project, and GET
// /{projectKey}/payments/key={key} reads it back. A create with a key
// the project holds is refused 400 with the error response of
// docs.commercetools.com/api/errors: DuplicateField, "A duplicate value
// $duplicateValue exists for field $field.", and, when conflicting is
// set, DuplicateFieldWithConflictingResource, which names the resource
// holding the value in conflictingResource. A key not found is 404
// ResourceNotFound.
type commercetools struct {
	lose        int  // how many of the first creates lose their answer (connection dropped after the payment is made)
	unavailable bool // the first create, once made, is answered 503 (an upstream reset, as Envoy reports it)
	conflicting bool // refuse a held key with DuplicateFieldWithConflictingResource

	mu      sync.Mutex
	byKey   map[string]string // key → payment id
	creates []string          // each create's body
	queries int
}

func newCommercetools(t testing.TB, ct *commercetools) *httptest.Server {
	t.Helper()
	ct.byKey = map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(ct.serve))
	t.Cleanup(srv.Close)
	return srv
}

func (ct *commercetools) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ct.mu.Lock()
	defer ct.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if r.Method == http.MethodGet {
		ct.queries++
		key, _ := strings.CutPrefix(r.URL.Path, "/shop/payments/key=")
		id, ok := ct.byKey[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			msg := fmt.Sprintf("The Resource with key '%s' was not found.", key)
			_, _ = fmt.Fprintf(w, `{"statusCode":404,"message":%q,"errors":[{"code":"ResourceNotFound","message":%q}]}`, msg, msg)
			return
		}
		_, _ = io.WriteString(w, ctPayment(id, key))
		return
	}
	ct.creates = append(ct.creates, string(body))
	var draft struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(body, &draft)
	if id, ok := ct.byKey[draft.Key]; ok {
		w.WriteHeader(http.StatusBadRequest)
		if ct.conflicting {
			msg := fmt.Sprintf(`A duplicate value '"%s"' exists for field 'key' on payment %s.`, draft.Key, id)
			_, _ = fmt.Fprintf(w, `{"statusCode":400,"message":%q,"errors":[{"code":"DuplicateFieldWithConflictingResource","message":%q,"field":"key","duplicateValue":%q,"conflictingResource":{"typeId":"payment","id":%q}}]}`, msg, msg, draft.Key, id)
			return
		}
		msg := fmt.Sprintf(`A duplicate value '"%s"' exists for field 'key'.`, draft.Key)
		_, _ = fmt.Fprintf(w, `{"statusCode":400,"message":%q,"errors":[{"code":"DuplicateField","message":%q,"field":"key","duplicateValue":%q}]}`, msg, msg, draft.Key)
		return
	}
	id := fmt.Sprintf("8f0c7a4e-3b1d-4c5e-9a2f-%012d", len(ct.byKey)+1)
	ct.byKey[draft.Key] = id
	if ct.unavailable && len(ct.creates) == 1 {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `upstream connect error or disconnect/reset before headers. reset reason: connection termination`)
		return
	}
	if len(ct.creates) <= ct.lose {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, ctPayment(id, draft.Key))
}

// ctPayment is a Payment as commercetools answers it: no status of its
// own (paymentStatus holds a PSP's codes and a State reference), its
// amount in amountPlanned.
func ctPayment(id, key string) string {
	return fmt.Sprintf(`{"id":%q,"version":1,"key":%q,"amountPlanned":{"type":"centPrecision","currencyCode":"EUR","centAmount":4200,"fractionDigits":2},"paymentMethodInfo":{"paymentInterface":"psp","method":"card"},"paymentStatus":{},"transactions":[],"interfaceInteractions":[],"createdAt":"2026-11-29T12:00:00.000Z","lastModifiedAt":"2026-11-29T12:00:00.000Z"}`, id, key)
}

const ctKey = "pay-2026-11-29-000731"

var ctDraft = `{"key":"` + ctKey + `","amountPlanned":{"currencyCode":"EUR","centAmount":4200},"paymentMethodInfo":{"paymentInterface":"psp","method":"card"}}`

func ctRequest(base string) idem.Request {
	return idem.Request{Key: ctKey, URL: base + "/shop/payments", Body: []byte(ctDraft)}
}

// requireOnePayment asserts that the project holds one payment, under
// the key, and that every create carried the same draft, n of them.
func (ct *commercetools) requireOnePayment(t testing.TB, n int) {
	t.Helper()
	ct.mu.Lock()
	defer ct.mu.Unlock()
	require.Len(t, ct.byKey, 1, "payments")
	require.Contains(t, ct.byKey, ctKey, "payments")
	require.Len(t, ct.creates, n, "creates")
	for i, b := range ct.creates {
		require.Equalf(t, ctDraft, b, "create %d: the draft, with its key", i+1)
	}
}

// A create whose answer is lost is looked up by its key (GET
// /{projectKey}/payments/key={key}, the endpoint a user gives
// WithResultEndpoint) before anything is resent: the Payment found,
// which has no status of its own, settles it, one payment made.
func TestCommercetoolsLostCreateSettledByKeyLookup(t *testing.T) {
	ct := &commercetools{lose: 1}
	srv := newCommercetools(t, ct)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithResultEndpoint("/shop/payments/key={key}"))

	res, err := c.Submit(t.Context(), ctRequest(srv.URL))
	requireOutcome(t, res, err, idem.StateSucceeded, nil, ct.byKey[ctKey], "")
	ct.requireOnePayment(t, 1)
	require.Equal(t, 1, ct.queries, "key lookups")
}

// Without a lookup, the create whose answer was lost is resent with the
// same key and refused 400 DuplicateField for the field "key" (or
// DuplicateFieldWithConflictingResource naming the payment): the
// payment is ours, so the refusal is no failure (ErrFailed would invite
// it again under a new key). It is resent as any refusal after a send
// may be a gateway's, then left for a person; one payment.
func TestCommercetoolsDuplicateKeyAfterLostAnswerIsNoFailure(t *testing.T) {
	for _, conflicting := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflictingResource=%v", conflicting), func(t *testing.T) {
			ct := &commercetools{lose: 1, conflicting: conflicting}
			srv := newCommercetools(t, ct)
			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody())

			res, err := c.Submit(t.Context(), ctRequest(srv.URL))
			requireRefusedAfterSend(t, c, res, err, ctKey, "payment made under the key")
			ct.requireOnePayment(t, 4)
		})
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy
// (Istio retries the 503 of an upstream reset, the payment made): the
// payment may be ours, so it is flagged for a person (ReviewKeyInUse),
// never failed nor resent.
func TestCommercetoolsDuplicateKeyToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, conflicting := range []bool{false, true} {
		t.Run(fmt.Sprintf("conflictingResource=%v", conflicting), func(t *testing.T) {
			ct := &commercetools{unavailable: true, conflicting: conflicting}
			ct.byKey = map[string]string{}
			sidecar := retryingSidecar(t, ct.serve)
			c := clientFor(t, sidecar, idemtest.NewClock(epoch), idem.WithKeyInBody())

			requireLeftForAPerson(t, c, ctRequest(sidecar.URL), "A duplicate value")
			ct.requireOnePayment(t, 2)
		})
	}
}
