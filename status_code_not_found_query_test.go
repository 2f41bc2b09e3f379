package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// midtransStatus is Midtrans's Core API behind a gateway that timed out
// the first charge before it reached Midtrans (a 504 of its own), with
// the status query GET /v2/{order_id}/status beside it. Midtrans answers
// a query for an order_id it never saw HTTP 200, its own code in the
// body, {"status_code":"404","status_message":"Transaction doesn't
// exist."}: midtrans-nodejs-client (lib/httpClient.js) rejects any body
// status_code of 400 and up but 407 from a 2xx for that reason.
type midtransStatus struct {
	midtransCharges
	queries int
}

func (m *midtransStatus) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v2/"), "/status")
		m.mu.Lock()
		m.queries++
		held := m.held[id]
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !held {
			_, _ = io.WriteString(w, `{"status_code":"404","status_message":"Transaction doesn't exist.","id":"8d6b1e4a-0f7e-4b8c-9a59-3c2d1f6e7a10"}`)
			return
		}
		_, _ = io.WriteString(w, `{"status_code":"200","status_message":"Success, transaction is found","transaction_id":"7b0cd1b4-e2a6-4a32-a4b6-6aa0e8e2f1b8",`+
			`"order_id":"`+id+`","transaction_status":"capture","fraud_status":"accept"}`)
		return
	}
	m.mu.Lock()
	first := len(m.charges) == 0
	if first {
		m.charges = append(m.charges, "") // the gateway's: never reached Midtrans
	}
	m.mu.Unlock()
	if first {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = io.WriteString(w, `<html><body><h1>504 Gateway Time-out</h1></body></html>`)
		return
	}
	m.midtransCharges.serve(w, r)
}

// After a gateway's 504 to a charge that never reached Midtrans, its
// status query's "Transaction doesn't exist." (HTTP 200, status_code
// "404" in the body) is a "not found", whichever decoder reads it: never
// the charge's failure, which would invite it again under a new
// order_id; the same order_id is resent once the result lag has passed
// (Midtrans de-duplicates by it), and the charge captured once.
func TestStatusCodeNotFoundQueryIsNotFound(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []idem.Option
		want idem.State
	}{
		{"midtrans-go's reading", []idem.Option{idem.WithDecoder(decodeMidtrans)}, idem.StateSucceeded},
		// DecodeJSON does not read transaction_status: the captured
		// charge, answered 200 with an id, is in hand, and asked about.
		{"DecodeJSON", nil, idem.StateProcessing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &midtransStatus{midtransCharges: midtransCharges{refusal: "Duplicate order ID. order_id has already been utilized previously", held: map[string]bool{}}}
			srv := httptest.NewServer(http.HandlerFunc(m.serve))
			t.Cleanup(srv.Close)
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, srv, clock, append(tt.opts, idem.WithKeyInBody(), idem.WithResultEndpoint("/v2/{key}/status"))...)
			req := idem.Request{Key: "order-7", URL: srv.URL + "/v2/charge",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(midtransCharge)}
			res, err := c.Submit(t.Context(), req)
			require.NotErrorIs(t, err, idem.ErrFailed, "a charge never seen read as failed")
			if err == nil {
				require.Equal(t, tt.want, res.State)
			} else {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				clock.Advance(idem.DefaultResultLag)
				_, err = c.Resume(t.Context())
				require.NoError(t, err)
			}
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "order-7")
			require.NoError(t, err)
			require.Equal(t, tt.want, op.State)
			require.Empty(t, op.Review)
			m.mu.Lock()
			defer m.mu.Unlock()
			require.Equal(t, 1, m.captures, "captures")
			require.Equal(t, []string{"", midtransCharge}, m.charges, "charges: the gateway's 504, then one resend")
			require.Positive(t, m.queries, "queries")
		})
	}
}
