package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// momoDisbursements is MTN MoMo's disbursement transfer, POST
// /disbursement/v1_0/transfer, keyed by the X-Reference-Id header (a
// UUID): accepted 202 with no body, its outcome read later by GET
// /disbursement/v1_0/transfer/{X-Reference-Id}. A reference it holds is
// refused 409 RESOURCE_ALREADY_EXIST, "Duplicated Reference ID. Every
// request must have a unique reference ID" (momodeveloper.mtn.com, Common
// Error Codes), whose body is {"code":"RESOURCE_ALREADY_EXIST","message":
// "Duplicated reference id. Creation of resource failed."} as MoMo
// clients' tests hold it; never the first answer again, and the reference
// never expires. The first create's answer is lost after the transfer:
// a gateway's 504, or behind the client's sidecar (Istio) a 503 reset the
// sidecar retries.
type momoDisbursements struct {
	mu        sync.Mutex
	lost      int               // the answer the first create loses: 503 or 504
	conflict  string            // the 409's body, if not MoMo's own
	transfers map[string]string // reference -> the create's body
	creates   []string          // each create's X-Reference-Id
	queries   int
}

func (m *momoDisbursements) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	defer m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if ref, ok := strings.CutPrefix(r.URL.Path, "/disbursement/v1_0/transfer/"); ok && r.Method == http.MethodGet {
		m.queries++
		if _, held := m.transfers[ref]; !held {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"RESOURCE_NOT_FOUND","message":"Requested resource was not found."}`)
			return
		}
		_, _ = io.WriteString(w, `{"amount":"100","currency":"EUR","financialTransactionId":"363440463","externalId":"payout-1",`+
			`"payee":{"partyIdType":"MSISDN","partyId":"46733123453"},"status":"SUCCESSFUL"}`)
		return
	}
	ref := r.Header.Get("X-Reference-Id")
	m.creates = append(m.creates, ref)
	if _, held := m.transfers[ref]; held {
		w.WriteHeader(http.StatusConflict)
		if m.conflict != "" {
			_, _ = io.WriteString(w, m.conflict)
			return
		}
		_, _ = io.WriteString(w, `{"code":"RESOURCE_ALREADY_EXIST","message":"Duplicated reference id. Creation of resource failed."}`)
		return
	}
	m.transfers[ref] = string(body)
	w.WriteHeader(m.lost)
}

// decodeMoMoTransfer reads a transfer as MoMo's clients do: the create's
// 202 is accepted, not done; the transfer's status says the rest
// (PENDING, SUCCESSFUL, FAILED with its reason).
func decodeMoMoTransfer(a *idem.Answer) (idem.Outcome, error) {
	if !a.Query && a.StatusCode == http.StatusAccepted {
		return idem.Outcome{State: idem.StateProcessing}, nil
	}
	var v struct {
		FinancialTransactionID string `json:"financialTransactionId"`
		Status                 string `json:"status"`
		Reason                 any    `json:"reason"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch v.Status {
	case "SUCCESSFUL":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.FinancialTransactionID}, nil
	case "FAILED":
		return idem.Outcome{State: idem.StateFailed, Reason: "momo: transfer failed"}, nil
	}
	return idem.Outcome{State: idem.StateProcessing}, nil
}

// momoClient is a client with the default settings for MoMo's transfers
// at srv, the key in X-Reference-Id, asking the transfer's status by it
// if withEndpoint.
func momoClient(t testing.TB, srv *httptest.Server, withEndpoint bool) *idem.Client {
	t.Helper()
	opts := []idem.Option{idem.WithKeyHeader("X-Reference-Id", idem.KeyBare), idem.WithDecoder(decodeMoMoTransfer)}
	if withEndpoint {
		opts = append(opts, idem.WithResultEndpoint(srv.URL+"/disbursement/v1_0/transfer/{key}"))
	}
	return clientFor(t, srv, idemtest.NewClock(epoch), opts...)
}

const momoTransfer = `{"amount":"100","currency":"EUR","externalId":"payout-1","payee":{"partyIdType":"MSISDN","partyId":"46733123453"},` +
	`"payerMessage":"payout","payeeNote":"payout"}`

const momoRef = "5f3c1a2e-8b4d-4c6a-9e1f-2a7b3c4d5e6f"

// MoMo's 409 names its key "reference id", the X-Reference-Id header
// without its "X-": it was read as the key's request still in flight
// elsewhere, so to a first attempt whose sidecar's copy had made the
// transfer it was resent on every visit, each copy refused the same, the
// call ending pending, until the key window passed and a person was
// asked anyway (about 16 creates), with or without the status endpoint,
// which a key in flight elsewhere never asks. It says the key was used:
// left for a person at once (ReviewKeyInUse), one transfer, nothing
// resent.
//
// So is such a 409 that also says which reference to take next, in the
// words a payin service answers a reference ID it holds ("Transaction
// with this reference ID already exists. Please use a different
// reference ID for new transactions."): its "different" is about the key
// a new request should take, as PayPal's "Use a different
// PayPal-Request-Id" is, not this request. With the key's name without
// its "X-" the key's for namesKey and not for the words after
// "different", it was read as a request that differs: ErrFailed (and
// ErrKeyConflict), inviting a second transfer under a new reference.
func TestDuplicatedReferenceIDToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, tc := range []struct{ name, conflict, words string }{
		{"no status endpoint", "", "Duplicated reference id"},
		{"status endpoint", "", "Duplicated reference id"},
		{"the next reference named", `{"code":"RESOURCE_ALREADY_EXIST","message":"Transaction with this reference ID already exists. ` +
			`Please use a different reference ID for new transactions."}`, "different reference ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &momoDisbursements{lost: http.StatusServiceUnavailable, transfers: map[string]string{}, conflict: tc.conflict}
			sidecar := retryingSidecar(t, m.serve)
			c := momoClient(t, sidecar, tc.name != "no status endpoint")

			requireLeftForAPerson(t, c, idem.Request{Key: momoRef, URL: sidecar.URL + "/disbursement/v1_0/transfer", Body: []byte(momoTransfer)},
				tc.words)

			m.mu.Lock()
			defer m.mu.Unlock()
			require.Len(t, m.transfers, 1, "transfers")
			require.Equal(t, []string{momoRef, momoRef}, m.creates, "copies: ours and the sidecar's, nothing resent")
			require.Zero(t, m.queries, "another request's key is never asked about")
		})
	}
}

// After a gateway's 504 that followed the transfer, the resend's 409
// comes after an attempt of ours that may have executed: the status
// endpoint by the reference settles it, one transfer, one create and one
// query; without one it is left for a person once the refusals persist
// (three 409s after the 504, then nothing more: the reference never
// expires, so every later resend would be refused the same), never
// failed, every create under the one reference.
func TestDuplicatedReferenceIDAfterALostAnswer(t *testing.T) {
	for _, withEndpoint := range []bool{false, true} {
		t.Run(map[bool]string{false: "no status endpoint", true: "status endpoint"}[withEndpoint], func(t *testing.T) {
			m := &momoDisbursements{lost: http.StatusGatewayTimeout, transfers: map[string]string{}}
			srv := newVendor(t, shape{status: 200}).srv
			srv.Config.Handler = http.HandlerFunc(m.serve)
			c := momoClient(t, srv, withEndpoint)

			res, err := c.Submit(t.Context(), idem.Request{Key: momoRef, URL: srv.URL + "/disbursement/v1_0/transfer", Body: []byte(momoTransfer)})
			creates, queries := 1, 1
			if withEndpoint {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "363440463", res.ResourceID)
			} else {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.NotErrorIs(t, err, idem.ErrFailed, "the transfer made read as failed")
				require.Equal(t, idem.StateUnknown, res.State)
				require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
				creates, queries = 4, 0
			}

			m.mu.Lock()
			defer m.mu.Unlock()
			require.Len(t, m.transfers, 1, "transfers")
			require.Equal(t, slices.Repeat([]string{momoRef}, creates), m.creates, "creates, each under the one reference")
			require.Equal(t, queries, m.queries, "status queries")
		})
	}
}
