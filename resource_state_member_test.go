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

// Revolut Business names a transaction's status "state": a transfer
// (POST /transfer, POST /pay) is answered {"id","state","created_at",
// "completed_at"}, its state one of created, pending, completed,
// declined, failed or reverted
// (developer.revolut.com/docs/business/create-transfer), and so is a
// transaction read back (developer.revolut.com/docs/business/get-transaction,
// with "type" and "request_id" beside them). Only "failed" and
// "pending" are words of idem's own envelope; the rest were read as an
// unknown envelope state, proving nothing: a completed transfer was
// never settled, a declined one never failed.
func TestDecodeJSONReadsResourceState(t *testing.T) {
	const id = "630f95f7-a3f9-abf2-b4e4-3f65281234dc"
	revolut := func(state string) string {
		return `{"id":"` + id + `","state":"` + state + `","created_at":"2020-11-23T08:39:35.811005Z"}`
	}
	requireDecodes(t, []decodeRow{
		{revolut("completed"), 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		{`{"id":"` + id + `","state":"completed","created_at":"2020-11-23T08:39:35.811005Z","completed_at":"2020-11-23T08:39:35.811005Z"}`, 200,
			idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		{revolut("declined"), 200, idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: "declined"}, true},
		// "failed" is the envelope's word: failed, and the id is kept.
		{revolut("failed"), 200, idem.Outcome{State: idem.StateFailed, ResourceID: id}, true},
		// "pending" is processing, as before, without the transaction's
		// id: an "id" beside a running state may be a job's, and a later
		// answer naming the resource made would read as a second one.
		{revolut("pending"), 200, idem.Outcome{State: idem.StateProcessing}, true},
		{`{"id":"job_1","state":"processing"}`, 200, idem.Outcome{State: idem.StateProcessing}, true},
		// Created, to be processed later or on schedule: the transfer was
		// made, as a resource of any other status is (202 aside).
		{revolut("created"), 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		{revolut("created"), 202, idem.Outcome{State: idem.StateProcessing, ResourceID: id}, true},
		{revolut("completed"), 202, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		// Reverted after it was made (the receiver unreachable): no failure
		// of the call, which "failed" would have made again.
		{revolut("reverted"), 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		// A transaction read back by request_id (get-transaction).
		{`{"id":"` + id + `","type":"transfer","request_id":"k1","state":"completed","created_at":"2020-11-23T08:39:35.811005Z"}`, 200,
			idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		{`{"id":17,"state":"DECLINED"}`, 201, idem.Outcome{State: idem.StateFailed, ResourceID: "17", Reason: "DECLINED"}, true},
		{`{"id":"op_1","state":"Running"}`, 200, idem.Outcome{State: idem.StateProcessing, ResourceID: "op_1"}, true},
		// The envelope's own answers read as they did.
		{`{"state":"succeeded","resourceId":"ord_1","id":"x"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, true},
		{`{"state":"processing","resourceId":"ord_1","id":"x"}`, 200, idem.Outcome{State: idem.StateProcessing, ResourceID: "ord_1"}, true},
		{`{"state":"pending"}`, 200, idem.Outcome{State: idem.StateProcessing}, true},
		// What proves nothing still does.
		{`{"id":"` + id + `","state":"succeeded"}`, 200, idem.Outcome{}, false}, // the envelope's success names its resource
		{`{"state":"completed"}`, 200, idem.Outcome{}, false},                   // a state without a resource
		{`{"id":"","state":"completed"}`, 200, idem.Outcome{}, false},
		{`{"id":0,"state":"completed"}`, 200, idem.Outcome{}, false},
		{`{"id":"req_1","state":"error"}`, 200, idem.Outcome{}, false},
		{`{"id":"req_1","state":"Errored"}`, 200, idem.Outcome{}, false},
		// A JSON-RPC answer's id is the call's.
		{`{"jsonrpc":"2.0","id":1,"state":"completed"}`, 200, idem.Outcome{}, false},
		{`{"jsonrpc":"2.0","id":"c1","state":"active","result":{}}`, 200, idem.Outcome{}, false},
		{`{"jsonrpc":"2.0","id":1,"state":"pending"}`, 200, idem.Outcome{State: idem.StateProcessing}, true},
		// An error beside it, or "success": false, is no outcome.
		{`{"id":"` + id + `","state":"completed","error":{"code":3000}}`, 200, idem.Outcome{}, false},
		{`{"id":"` + id + `","state":"completed","errors":[{"message":"boom"}]}`, 200, idem.Outcome{}, false},
		{`{"id":"` + id + `","state":"completed","success":false}`, 200, idem.Outcome{}, false},
		// An echoed key beside "state" must be the operation's.
		{`{"id":"` + id + `","state":"completed","key":"another-key"}`, 200, idem.Outcome{}, false},
		{`{"id":"` + id + `","state":"completed","idempotency_key":"another-key"}`, 200, idem.Outcome{}, false},
		{`{"id":"` + id + `","state":"completed","key":"k1"}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		// A "state" beside a "status" may be no status at all (a flat
		// address's, as EasyPost's Address object has): a "status" that
		// says something decides.
		{`{"id":"pay_1","state":"CA","status":"failed"}`, 200, idem.Outcome{State: idem.StateFailed, ResourceID: "pay_1", Reason: "failed"}, true},
		{`{"id":"pay_1","state":"CA","status":"error"}`, 200, idem.Outcome{}, false},
		{`{"id":"pay_1","state":"CA","status":"Running"}`, 200, idem.Outcome{State: idem.StateProcessing, ResourceID: "pay_1"}, true},
		{`{"id":"adr_1","object":"Address","state":"CA","zip":"94107"}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "adr_1"}, true},
		{`{"id":"` + id + `","state":"declined","status":"ok"}`, 200, idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: "declined"}, true},
		// A PayPal order's payments say what became of it, whatever word
		// names its own status.
		{`{"id":"O1","state":"COMPLETED","purchase_units":[{"payments":{"captures":[{"status":"DECLINED"}]}}]}`, 201,
			idem.Outcome{State: idem.StateFailed, ResourceID: "O1", Reason: "DECLINED"}, true},
		// A commercetools Order in a state of the project's workflow: its
		// "state" a Reference to the State, no status
		// (commercetools_order_state_test.go); a "status" beside it still
		// decides, and any other object there proves nothing.
		{`{"id":"o1","orderState":"Open","state":{"typeId":"state","id":"s1"}}`, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: "o1"}, true},
		{`{"id":"o1","state":{"typeId":"state","id":"s1","obj":{"key":"order-received"}}}`, 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: "o1"}, true},
		{`{"id":"o1","state":{"typeId":"state","id":"s1"}}`, 202, idem.Outcome{State: idem.StateProcessing, ResourceID: "o1"}, true},
		{`{"id":"o1","state":{"typeId":"state","id":"s1"},"status":"declined"}`, 201, idem.Outcome{State: idem.StateFailed, ResourceID: "o1", Reason: "declined"}, true},
		{`{"state":{"typeId":"state","id":"s1"}}`, 200, idem.Outcome{}, false},
		{`{"id":"p1","state":{"status":"declined"}}`, 200, idem.Outcome{}, false},
		{`{"id":"p1","state":{"typeId":"payment","id":"p0"}}`, 200, idem.Outcome{}, false},
		{`{"id":"p1","state":{"typeId":"state","id":""}}`, 200, idem.Outcome{}, false},
		{`{"id":"p1","state":["declined"]}`, 200, idem.Outcome{}, false},
	})
}

// revolutBusiness models Revolut Business's POST /pay: the key is the
// body's request_id ("the same request_id should be used for requests
// related to the same transfer", developer.revolut.com/docs/business/create-payment),
// each new request_id makes one transaction, answered {"id","state",
// "created_at"}, and GET /transaction/{request_id}?id_type=request_id
// reads it back (developer.revolut.com/docs/business/get-transaction).
type revolutBusiness struct {
	srv *httptest.Server

	mu    sync.Mutex
	first string            // the state a new transaction is answered with
	later string            // the state it is read back in
	txns  map[string]string // request_id → transaction id
	moved map[string]bool   // transactions that moved the money: completed
	posts int
	reads int
}

func newRevolutBusiness(t *testing.T, first, later string) *revolutBusiness {
	t.Helper()
	rb := &revolutBusiness{first: first, later: later, txns: map[string]string{}, moved: map[string]bool{}}
	rb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rb.mu.Lock()
		defer rb.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			rb.reads++
			reqID := strings.TrimPrefix(r.URL.Path, "/transaction/")
			txn, ok := rb.txns[reqID]
			if r.URL.Query().Get("id_type") != "request_id" || !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"code":3004,"message":"Transaction not found"}`)
				return
			}
			rb.moved[txn] = rb.moved[txn] || rb.later == "completed"
			_, _ = fmt.Fprintf(w, `{"id":%q,"type":"transfer","request_id":%q,"state":%q,"created_at":"2026-12-05T08:39:35.811005Z"}`, txn, reqID, rb.later)
			return
		}
		rb.posts++
		var req struct {
			RequestID string `json:"request_id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.RequestID == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		txn, ok := rb.txns[req.RequestID]
		if !ok {
			txn = fmt.Sprintf("630f95f7-a3f9-abf2-b4e4-%012d", len(rb.txns)+1)
			rb.txns[req.RequestID] = txn
			rb.moved[txn] = rb.first == "completed"
		}
		_, _ = fmt.Fprintf(w, `{"id":%q,"state":%q,"created_at":"2026-12-05T08:39:35.811005Z"}`, txn, rb.first)
	}))
	t.Cleanup(rb.srv.Close)
	return rb
}

// A Revolut transfer settles at default settings by the transaction's
// own "state": completed is succeeded with the transaction's id, declined
// is failed and never sent again, and pending is read back by
// request_id until it says which. Before, every one of them proved
// nothing: queried until the deadline, then left for a person.
func TestRevolutTransferSettlesByItsState(t *testing.T) {
	const key = "3c2e1d0f-6a5b-4c7d-8e9f-0a1b2c3d4e5f"
	body := `{"request_id":"` + key + `","account_id":"af98333c-ea53-482b-8ba3-9c4e2f1a2b3c",` +
		`"receiver":{"counterparty_id":"49c6a48b-6b58-40a0-b974-0b1c2d3e4f5a"},"amount":10,"currency":"GBP","reference":"Invoice 42"}`
	for _, tt := range []struct {
		first, later string
		want         idem.State
		transfers    int
		reads        int
	}{
		{"completed", "completed", idem.StateSucceeded, 1, 0},
		{"declined", "declined", idem.StateFailed, 0, 0},
		{"pending", "completed", idem.StateSucceeded, 1, 1},
	} {
		t.Run(tt.first, func(t *testing.T) {
			rb := newRevolutBusiness(t, tt.first, tt.later)
			c := clientFor(t, rb.srv, idemtest.NewClock(epoch), idem.WithKeyInBody(),
				idem.WithResultEndpoint("/transaction/{key}?id_type=request_id"))
			req := idem.Request{Key: key, URL: rb.srv.URL + "/pay", Body: []byte(body)}

			res, err := c.Submit(t.Context(), req)
			require.Equal(t, tt.want, res.State, "err: %v", err)
			if tt.want == idem.StateFailed {
				require.ErrorIs(t, err, idem.ErrFailed)
				require.Equal(t, "declined", res.Reason)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, "630f95f7-a3f9-abf2-b4e4-000000000001", res.ResourceID, "the transaction's id")

			again, err := c.Submit(t.Context(), req)
			require.Equal(t, tt.want, again.State, "err: %v", err)
			rb.mu.Lock()
			defer rb.mu.Unlock()
			require.Equal(t, 1, rb.posts, "transfer requests: a settled transfer is never sent again")
			require.Equal(t, 1, len(rb.txns), "transactions")
			require.Equal(t, tt.reads, rb.reads, "reads by request_id")
			moved := 0
			for _, m := range rb.moved {
				if m {
					moved++
				}
			}
			require.Equal(t, tt.transfers, moved, "transfers made")
		})
	}
}
