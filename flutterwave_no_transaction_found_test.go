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

// flutterwaveCharges is Flutterwave's v3 charge API with the charge's
// tx_ref, unique to it, in the body, as
// developer.flutterwave.com/v3.0/reference documents it: POST
// /v3/charges answers {"status":"success","message":…,"data":{"id",
// "tx_ref","status"}}, and GET /v3/transactions/verify_by_reference?tx_ref=…
// answers the transaction in the same envelope, or, for a tx_ref no
// transaction has, 400 {"status":"error","message":"No transaction was
// found for this id","data":null} (the answer integrations match:
// "treats 'no transaction yet' as not paid rather than an outage"). The
// connection of the first charge drops after the request was written,
// before Flutterwave took it.
type flutterwaveCharges struct {
	mu      sync.Mutex
	posts   int
	bodies  []string
	charged []string // the tx_ref of each charge made
}

func (f *flutterwaveCharges) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	f.mu.Lock()
	if r.Method == http.MethodGet {
		ref := r.URL.Query().Get("tx_ref")
		found := false
		for _, c := range f.charged {
			found = found || c == ref
		}
		f.mu.Unlock()
		if !found {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"status":"error","message":"No transaction was found for this id","data":null}`)
			return
		}
		_, _ = io.WriteString(w, flutterwaveTransaction(ref, "Transaction fetched successfully"))
		return
	}
	f.posts++
	f.bodies = append(f.bodies, string(b))
	first := f.posts == 1
	var req struct {
		TxRef string `json:"tx_ref"`
	}
	_ = json.Unmarshal(b, &req)
	if !first {
		f.charged = append(f.charged, req.TxRef)
	}
	f.mu.Unlock()
	if first {
		dropConnection(w)
		return
	}
	_, _ = io.WriteString(w, flutterwaveTransaction(req.TxRef, "Charge initiated"))
}

// flutterwaveTransaction is a successful charge in Flutterwave's
// envelope, trimmed.
func flutterwaveTransaction(ref, message string) string {
	return fmt.Sprintf(`{"status":"success","message":%q,"data":{"id":288200108,"tx_ref":%q,"flw_ref":"FLW-MOCK-1",`+
		`"amount":1500,"currency":"NGN","charged_amount":1500,"status":"successful","payment_type":"mobilemoneygh"}}`, message, ref)
}

// decodeFlutterwave reads Flutterwave's envelope as its SDKs do: the
// transaction's own status is data.status ("successful", "failed",
// "pending"); the envelope's "status" says only that the call worked.
func decodeFlutterwave(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Status string `json:"status"`
		Data   *struct {
			ID     json.Number `json:"id"`
			TxRef  string      `json:"tx_ref"`
			Status string      `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.Status != "success" || v.Data == nil || v.Data.TxRef != a.Key {
		return idem.Outcome{}, fmt.Errorf("not a Flutterwave transaction for %q", a.Key)
	}
	switch v.Data.Status {
	case "successful":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Data.ID.String()}, nil
	case "failed":
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.Data.ID.String(), Reason: "failed"}, nil
	case "pending":
		return idem.Outcome{State: idem.StateProcessing, ResourceID: v.Data.ID.String()}, nil
	}
	return idem.Outcome{}, fmt.Errorf("transaction status %q", v.Data.Status)
}

// Flutterwave's "No transaction was found for this id" is its verify
// endpoint's word that no charge has the tx_ref: the not-found that, with
// the key in the body, lets a resend go once the result lag has passed.
// Read as a query that said nothing (its words hold no "not found"), the
// charge Flutterwave never took was never sent again: every Resume only
// asked, and once the key window passed it was left to a person, the
// customer never charged. Now Resume after the lag resends it once, and
// the one charge settles it.
func TestFlutterwaveNoTransactionFoundResendsAfterTheLag(t *testing.T) {
	f := &flutterwaveCharges{}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, srv, clock, idem.WithKeyInBody(), idem.WithDecoder(decodeFlutterwave),
		idem.WithResultEndpoint(srv.URL+"/v3/transactions/verify_by_reference?tx_ref={key}"))
	const body = `{"tx_ref":"k","amount":"1500","currency":"NGN","email":"user@example.com","phone_number":"0244000000","network":"MTN"}`

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v3/charges?type=mobile_money_ghana", Body: []byte(body)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "not found within the lag: asked again, not resent")
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)

	requireResumeSucceeds(t, c, clock, "k", "288200108")

	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, []string{"k"}, f.charged, "charges")
	require.Equal(t, []string{body, body}, f.bodies, "the same bytes on both sends")
}
