package idem_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// trustlyPayouts is Trustly's JSON-RPC 1.1 API (eu.developers.trustly.com,
// Error messages), its AccountPayout call: every answer 200 OK, a refusal
// as {"version":"1.1","error":{"name":"JSONRPCError","code":…,"message":
// "ERROR_…","error":{…,"uuid":…,"data":{"code":…,"message":…}}}}. A call
// carries params.UUID, the request's own identifier, and params.Data.
// MessageID, the merchant's id for the payout, here the key: a UUID it
// has seen is refused 688 ERROR_DUPLICATE_UUID ("This UUID has been used
// before"), a MessageID 637 ERROR_DUPLICATE_MESSAGE_ID ("The MessageID has
// been used before"); the docs do not say which it checks first, and a
// copy of the same bytes carries both. Behind the client's sidecar
// (Istio) the first call's answer is a 503 reset after the payout, and the
// sidecar sends its copy.
type trustlyPayouts struct {
	mu       sync.Mutex
	uuids    []string // the UUID of each call
	payouts  []string // the MessageID of each payout made
	refusals []string // each refusal's message
}

func (p *trustlyPayouts) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var call struct {
		Params struct {
			UUID string `json:"UUID"`
			Data struct {
				MessageID string `json:"MessageID"`
			} `json:"Data"`
		} `json:"params"`
	}
	_ = json.Unmarshal(b, &call)
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	refuse := func(code int, message string) {
		p.refusals = append(p.refusals, message)
		_, _ = fmt.Fprintf(w, `{"version":"1.1","error":{"name":"JSONRPCError","code":%d,"message":%q,"error":{"signature":"c2ln",`+
			`"uuid":%q,"method":"AccountPayout","data":{"code":%d,"message":%q}}}}`, code, message, call.Params.UUID, code, message)
	}
	seen := slices.Contains(p.uuids, call.Params.UUID)
	p.uuids = append(p.uuids, call.Params.UUID)
	switch {
	case seen:
		refuse(688, "ERROR_DUPLICATE_UUID")
	case slices.Contains(p.payouts, call.Params.Data.MessageID):
		refuse(637, "ERROR_DUPLICATE_MESSAGE_ID")
	default:
		p.payouts = append(p.payouts, call.Params.Data.MessageID)
		podReset(w)
	}
}

// decodeTrustly reads a call's answer as Trustly's clients do
// (trustly-client-python's response.is_error(), error.message): an error
// member is the call's refusal, a result's data.orderid the payout.
func decodeTrustly(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		Result *struct {
			Data struct {
				OrderID string `json:"orderid"`
			} `json:"data"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	switch {
	case v.Error != nil:
		return idem.Outcome{State: idem.StateFailed, Reason: fmt.Sprintf("%d %s", v.Error.Code, v.Error.Message)}, nil
	case v.Result != nil && v.Result.Data.OrderID != "":
		return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Result.Data.OrderID}, nil
	}
	return idem.Outcome{}, errors.New("trustly: neither a result nor an error")
}

const trustlyPayout = `{"method":"AccountPayout","params":{"Signature":"c2ln","UUID":"258a2184-2842-b485-25ca-293525152425",` +
	`"Data":{"Username":"merchant","Password":"secret","NotificationURL":"https://example.com/trustly/notify","AccountID":"1234567890",` +
	`"MessageID":"payout-7f3c9a","Amount":"100.00","Currency":"SEK","Attributes":{"ShopperStatement":"Example"}}},"version":"1.1"}`

// ERROR_DUPLICATE_UUID to idem's first call answers its sidecar's copy of
// a call that paid out: the same bytes carry the same UUID. A decoder that
// reads Trustly's error member as the call's refusal had the call end
// ErrFailed, inviting the payout again under a new MessageID. A
// duplicate UUID, the request's own identifier, says this very request
// was received before: flagged for a person (ReviewKeyInUse), never
// failed nor resent. With the default decoder, which reads nothing in a
// JSON-RPC 1.1 answer, the same.
func TestDuplicateUUIDToAFirstAttemptBehindAMesh(t *testing.T) {
	for name, dec := range map[string]idem.Decoder{"trustly's reading": decodeTrustly, "the default decoder": nil} {
		t.Run(name, func(t *testing.T) {
			p := &trustlyPayouts{}
			sidecar := retryingSidecar(t, p.serve)
			c := heldKeyClient(t, sidecar, dec)

			requireLeftForAPerson(t, c, idem.Request{Key: "payout-7f3c9a", URL: sidecar.URL + "/api/1", Body: []byte(trustlyPayout)},
				"ERROR_DUPLICATE_UUID")

			p.mu.Lock()
			defer p.mu.Unlock()
			require.Equal(t, []string{"payout-7f3c9a"}, p.payouts, "payouts")
			require.Equal(t, []string{"ERROR_DUPLICATE_UUID"}, p.refusals, "the sidecar's copy refused; nothing resent")
		})
	}
}
