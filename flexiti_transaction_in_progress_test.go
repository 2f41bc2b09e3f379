package idem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// flexitiTransactions is Flexiti's POS API POST
// /client-id/{client_id}/transactions, keyed by the X-Idempotency-Key
// header: "Should Flexiti receive multiple transactions with the same
// idempotency key, only the first one will be processed, while
// subsequent (duplicated) requests will return the previously
// successful response" (flexiti.atlassian.net, Transactions Endpoints -
// POS API), a plain 200 nothing marks as replayed. Its errors are 409s
// ("409 | Bad Request", Error Overview) in the shape {"url":…,
// "message":…,"error":…}, "general_error" being "A generic error
// covering back-end process issues"; what a duplicate gets while the
// key's first transaction still runs is modelled as that 409, busy
// times, as no page says.
type flexitiTransactions struct {
	mu     sync.Mutex
	busy   int               // 409s left before the key's first transaction is done
	status int               // the status a transaction is answered with (0: 200)
	lose   bool              // the first transaction's answer is lost (the connection dropped)
	stored map[string]string // key -> the first transaction's 200
	keys   []string          // each POST's X-Idempotency-Key
	made   int               // transactions this server made
}

const flexitiBusy = `{"url":"/flexiti/pos-api/v2.5.1/client-id/flexitidemo/transactions","message":"A generic error covering back-end process issues",` +
	`"error":"general_error"}`

func (f *flexitiTransactions) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Header.Get("X-Idempotency-Key")
	f.keys = append(f.keys, key)
	w.Header().Set("Content-Type", "application/json")
	if stored, ok := f.stored[key]; ok {
		if f.busy > 0 {
			f.busy--
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, flexitiBusy)
			return
		}
		if f.status != 0 {
			w.WriteHeader(f.status)
		}
		_, _ = io.WriteString(w, stored)
		return
	}
	var tx struct {
		Amount json.Number `json:"amount"`
	}
	_ = json.Unmarshal(body, &tx)
	f.made++
	f.stored[key] = fmt.Sprintf(`{"transaction_id":%d,"account_number":12345678901234,"amount":%s,"transaction_type":"regular_purchase"}`,
		900+f.made, tx.Amount)
	if f.lose {
		f.lose = false
		dropConnection(w)
		return
	}
	_, _ = io.WriteString(w, f.stored[key])
}

// decodeFlexitiTransaction reads a posted transaction: its id is the
// operation's resource.
func decodeFlexitiTransaction(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		ID json.Number `json:"transaction_id"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.ID == "" {
		return idem.Outcome{}, fmt.Errorf("flexiti: no transaction: %w", err)
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.ID.String()}, nil
}

const flexitiKey = "pos-7-000123"

func flexitiServer(t testing.TB, f *flexitiTransactions, opts ...idem.Option) (*httptest.Server, *idem.Client, idem.Request) {
	t.Helper()
	f.stored = map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), append([]idem.Option{idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare),
		idem.WithDecoder(decodeFlexitiTransaction)}, opts...)...)
	return srv, c, idem.Request{Key: flexitiKey, URL: srv.URL + "/flexiti/pos-api/v2.5.1/client-id/flexitidemo/transactions",
		Body: []byte(`{"transaction_type":"regular_purchase","amount":123.45,"vcc_number":"5555444433332222","verification_code":"123"}`)}
}

func (f *flexitiTransactions) requireKeys(t testing.TB, n, made int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	requireEach(t, f.keys, n, flexitiKey, "X-Idempotency-Key")
	require.Equal(t, made, f.made, "transactions made")
}

// The first post's answer is lost after Flexiti made the transaction,
// which runs on: the resends get the in-progress 409, then the stored
// 200. Our own transaction, taken once: succeeded, one transaction.
// Pinned: idem did so before this test.
func TestFlexitiInProgressAfterALostAnswer(t *testing.T) {
	f := &flexitiTransactions{busy: 2, lose: true}
	_, c, req := flexitiServer(t, f)

	res, err := c.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "901", res.ResourceID)
	require.Empty(t, res.Review)
	rec, err := c.Store().Get(t.Context(), idem.DefaultScope, flexitiKey)
	require.NoError(t, err)
	require.False(t, rec.Open())
	require.Len(t, rec.Attempts, 4)
	f.requireKeys(t, 4, 1)
}

// The key is another intent's (a POS lane reusing its counter after a
// restart, the "merchant-managed (and incremented)" key), its
// transaction for 55.00 still running: our first post gets the 409,
// and, once that transaction is done, its stored 200. idem took that
// 200 for ours: succeeded with transaction 42, the 123.45 purchase
// never made, the till told it was paid. A 2xx that is not marked
// replayed, after a 409 said another request held the key before
// anything of ours ran, is judged as a marked replay is then: left for
// a person (ReviewKeyInUse), its resource not taken, nothing failed.
func TestFlexitiStoredAnswerAfterAnotherRequestHeldTheKey(t *testing.T) {
	f := &flexitiTransactions{busy: 2}
	_, c, req := flexitiServer(t, f)
	f.stored[flexitiKey] = `{"transaction_id":42,"account_number":12345678901234,"amount":55.00,"transaction_type":"regular_purchase"}`

	res, err := c.Submit(t.Context(), req)
	requireOtherTransactionsAnswer(t, c, f, res, err, http.StatusOK)

	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "still for a person: %+v", sum)
	f.requireKeys(t, 3, 0)
}

// The transaction holding the key is a copy of ours (a mesh's retry of
// our first post, TestMeshRetryInFlightThenStoredOrderIsOurs): the 409s,
// then its stored 200, which describes our purchase, amount for amount.
// Ours: succeeded with it, one transaction, no person asked. Pinned: the
// comparison that leaves another request's answer for a person must not
// flag this one.
func TestFlexitiStoredAnswerOfACopyOfOursAfterTheKeyWasHeld(t *testing.T) {
	f := &flexitiTransactions{busy: 2, made: 1}
	_, c, req := flexitiServer(t, f)
	f.stored[flexitiKey] = `{"transaction_id":901,"account_number":12345678901234,"amount":123.45,"transaction_type":"regular_purchase"}`

	res, err := c.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "901", res.ResourceID)
	require.Empty(t, res.Review)
	f.requireKeys(t, 3, 1)
}

// The same shape as TestFlexitiStoredAnswerAfterAnotherRequestHeldTheKey,
// the key's transaction answered 202 Accepted, still running, and read so
// by a classifier that gives 202 Processing (the verdict's use,
// TestProcessingVerdictOnTheFirstAttemptIsOurs). Modelled: Flexiti's
// answer is a 200; a server that runs its work asynchronously answers
// 202, "accepted for processing, but the processing has not been
// completed" (RFC 9110 15.3.3), and keeps it as the key's first answer
// as Flexiti keeps its 200. idem read the other transaction's stored 202
// as ours accepted: processing, resent to the end of its budget (5
// posts), and a webhook's Confirm for that transaction, which carries
// the key, then settled our purchase succeeded with transaction 42,
// unflagged. Left for a person as the 200 is, the Confirm keeps the flag.
func TestFlexitiStoredAcceptedAfterAnotherRequestHeldTheKey(t *testing.T) {
	f := &flexitiTransactions{busy: 2, status: http.StatusAccepted}
	_, c, req := flexitiServer(t, f, idem.WithClassifier(func(status int) idem.Verdict {
		if status == http.StatusAccepted {
			return idem.Processing
		}
		return idem.DefaultClassifier(status)
	}))
	f.stored[flexitiKey] = `{"transaction_id":42,"account_number":12345678901234,"amount":55.00,"transaction_type":"regular_purchase"}`

	res, err := c.Submit(t.Context(), req)
	requireOtherTransactionsAnswer(t, c, f, res, err, http.StatusAccepted)

	res, err = c.Confirm(t.Context(), idem.DefaultScope, flexitiKey,
		idem.Confirmation{State: idem.StateSucceeded, ResourceID: "42", Source: "flexiti-webhook", EventID: "evt-42", At: epoch})
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyInUse, res.Review, "the other transaction's event settled ours unflagged")
	f.requireKeys(t, 3, 0)
}

// requireOtherTransactionsAnswer asserts that a Submit whose key another
// transaction held (two 409s, then that transaction's stored answer of
// status last) ended left for a person, nothing of the other transaction
// journaled as ours, and no transaction made.
func requireOtherTransactionsAnswer(t testing.TB, c *idem.Client, f *flexitiTransactions, res *idem.Result, err error, last int) {
	t.Helper()
	requireOtherRequestsAnswer(t, c, flexitiKey, res, err, last, "")
	f.requireKeys(t, 3, 0)
}
