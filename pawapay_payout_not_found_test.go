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

// pawaPayPayouts is pawaPay's Merchant API v2 payouts
// (docs.pawapay.io/v2/api-reference/payouts): POST /v2/payouts takes the
// caller's payoutId in the body, answers {"payoutId","status":"ACCEPTED",
// "created"}, and a payoutId it holds "DUPLICATE_IGNORED"; GET
// /v2/payouts/{payoutId} answers 200 OK either way: {"status":"FOUND",
// "data":{the payout, its own "status" COMPLETED…}} or, for a payoutId it
// never received, {"status":"NOT_FOUND"} ("The payment was not found in
// pawaPay", check-payout-status). The first create's connection drops
// before pawaPay took it.
type pawaPayPayouts struct {
	mu     sync.Mutex
	posts  int
	bodies []string
	paid   []string // the payoutId of each payout made
}

func (p *pawaPayPayouts) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	p.mu.Lock()
	defer p.mu.Unlock()
	held := func(id string) bool {
		for _, x := range p.paid {
			if x == id {
				return true
			}
		}
		return false
	}
	if r.Method == http.MethodGet {
		id, _ := strings.CutPrefix(r.URL.Path, "/v2/payouts/")
		if !held(id) {
			_, _ = io.WriteString(w, `{"status":"NOT_FOUND"}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"status":"FOUND","data":{"payoutId":%q,"status":"COMPLETED","amount":"123.00","currency":"ZMW",`+
			`"country":"ZMB","created":"2026-11-29T12:00:01Z","providerTransactionId":"12356789"}}`, id)
		return
	}
	p.posts++
	p.bodies = append(p.bodies, string(b))
	var req struct {
		PayoutID string `json:"payoutId"`
	}
	_ = json.Unmarshal(b, &req)
	switch {
	case p.posts == 1:
		p.mu.Unlock()
		dropConnection(w)
		p.mu.Lock()
	case held(req.PayoutID):
		_, _ = fmt.Fprintf(w, `{"payoutId":%q,"status":"DUPLICATE_IGNORED","created":"2026-11-29T12:00:01Z"}`, req.PayoutID)
	default:
		p.paid = append(p.paid, req.PayoutID)
		_, _ = fmt.Fprintf(w, `{"payoutId":%q,"status":"ACCEPTED","created":"2026-11-29T12:00:01Z"}`, req.PayoutID)
	}
}

// decodePawaPay reads pawaPay's answers as its docs describe them: a
// payout accepted is running, and the payout found is read by its own
// status under "data". Anything else proves nothing.
func decodePawaPay(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		PayoutID string `json:"payoutId"`
		Status   string `json:"status"`
		Data     *struct {
			PayoutID string `json:"payoutId"`
			Status   string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch {
	case v.Status == "ACCEPTED" && v.PayoutID == a.Key:
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.PayoutID}, nil
	case v.Status == "FOUND" && v.Data != nil && v.Data.PayoutID == a.Key && v.Data.Status == "COMPLETED":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data.PayoutID}, nil
	case v.Status == "FOUND" && v.Data != nil && v.Data.PayoutID == a.Key && v.Data.Status == "FAILED":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.Data.PayoutID, Reason: "FAILED"}, nil
	}
	return idem.Outcome{}, fmt.Errorf("not a pawaPay payout %q answer: status %q", a.Key, v.Status)
}

// pawaPay's read-back answers a payoutId it never received 200 OK
// {"status":"NOT_FOUND"}: its word that the create never arrived, read
// before the Decoder, which has no way to say "not found". Resume after
// the lag resends the payout once, with the same bytes, and the one
// payout settles it; read as an answer that proves nothing, the payout
// pawaPay never took would never be sent again, left to a person once
// the key window passed.
func TestPawaPayPayoutNotFoundResendsAfterTheLag(t *testing.T) {
	p := &pawaPayPayouts{}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(decodePawaPay),
		idem.WithResultEndpoint(srv.URL+"/v2/payouts/{key}"))
	const key = "f4401bd2-1568-4140-bf2d-eb77d2b2b639"
	const body = `{"payoutId":"` + key + `","amount":"123.00","currency":"ZMW",` +
		`"recipient":{"type":"MMO","accountDetails":{"phoneNumber":"260763456789","provider":"MTN_MOMO_ZMB"}}}`

	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/v2/payouts", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "not found within the lag: asked again, not resent")
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)

	clock.Advance(idem.DefaultResultLag)
	var op *idem.Operation
	for range 3 {
		_, err = c.Resume(t.Context())
		require.NoError(t, err)
		op, err = c.Lookup(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		if op.State == idem.StateSucceeded {
			break
		}
		clock.Advance(idem.DefaultResultLag)
	}
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, key, op.Result.ResourceID)

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, []string{key}, p.paid, "payouts")
	require.Equal(t, []string{body, body}, p.bodies, "the lost create and one resend, the same bytes")
}
