package idem_test

import (
	"encoding/json"
	"testing"

	"github.com/idemkit/idem"
)

// lagoEvents is Lago's usage event ingestion (POST /api/v1/events), whose
// key is the event's transaction_id in the body: on a Postgres event
// store it refuses one it holds 422 validation_errors with
// error_details.transaction_id ["value_already_exist"] (getlago/lago-api's
// Events::CreateService; the envelope as getlago.com/docs/api-reference/errors
// gives it), and its clients read that 422 as the event already there
// (lago-client's examples/event.rs fetches it instead). A duplicate event
// is billed twice, so the refusal must never read as failed.
func lagoEvents() *heldKeys {
	return &heldKeys{
		keyOf:  jsonMember("event", "transaction_id"),
		status: 422,
		refusal: func(string) string {
			return `{"status":422,"error":"Unprocessable Entity","code":"validation_errors",` +
				`"error_details":{"transaction_id":["value_already_exist"]}}`
		},
	}
}

// decodeLagoEvent reads the answer as Lago's SDKs do (lago-ruby-client,
// lago-go-client: any status but 2xx is an error): the event echoed
// back settles it, anything else is Lago's refusal.
func decodeLagoEvent(a *idem.Answer) (idem.Outcome, error) {
	if a.StatusCode/100 != 2 {
		return idem.Outcome{State: idem.StateFailed, Reason: string(a.Body)}, nil
	}
	var v struct {
		Event struct {
			LagoID string `json:"lago_id"`
		} `json:"event"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Event.LagoID}, nil
}

const lagoEvent = `{"event":{"transaction_id":"evt-7f3c9a","external_subscription_id":"sub_1234",` +
	`"code":"api_calls","timestamp":1764936000,"properties":{"calls":"120"}}}`

func lagoEventRequest(base string) idem.Request {
	return idem.Request{Key: "evt-7f3c9a", URL: base + "/api/v1/events", Body: []byte(lagoEvent)}
}

// lagoDecoders: Lago's answers read as its SDKs read them, and by
// DecodeJSON.
var lagoDecoders = []struct {
	name   string
	decode idem.Decoder
}{{"lago's reading", decodeLagoEvent}, {"DecodeJSON", idem.DecodeJSON}}

// Lago's value_already_exist to the resend after a lost answer says the
// event is held: never failed, for a person once the refusals persist.
func TestLagoTransactionIDHeldToAResendIsNoFailure(t *testing.T) {
	for _, tt := range lagoDecoders {
		t.Run(tt.name, func(t *testing.T) {
			requireHeldKeyResendForAPerson(t, lagoEvents(), tt.decode, lagoEventRequest)
		})
	}
}

// The same refusal to idem's first attempt answers its sidecar's copy.
func TestLagoTransactionIDHeldToAFirstAttemptBehindAMesh(t *testing.T) {
	for _, tt := range lagoDecoders {
		t.Run(tt.name, func(t *testing.T) {
			requireHeldKeyFirstAttemptForAPerson(t, lagoEvents(), tt.decode, lagoEventRequest, "Unprocessable Entity")
		})
	}
}
