package idem_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// decodeChargebeeSubscription reads the answer as chargebee-node does: a
// 2xx is the result, its subscription the resource made; anything else
// is Chargebee's refusal ({"message","type","api_error_code"},
// apidocs.chargebee.com/docs/api/error-handling).
func decodeChargebeeSubscription(a *idem.Answer) (idem.Outcome, error) {
	if a.StatusCode/100 != 2 {
		var e struct {
			Message      string `json:"message"`
			APIErrorCode string `json:"api_error_code"`
		}
		_ = json.Unmarshal(a.Body, &e)
		return idem.Outcome{State: idem.StateFailed, Reason: e.Message + " (" + e.APIErrorCode + ")"}, nil
	}
	var v struct {
		Subscription struct {
			ID string `json:"id"`
		} `json:"subscription"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil {
		return idem.Outcome{}, err
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.Subscription.ID}, nil
}

// Chargebee's replay (chargebee-idempotency-replayed: true) to the resend
// after a lost answer is the subscription ours made: read as its SDK
// reads it, settled with its id, one resend. DecodeJSON cannot read
// Chargebee's envelope, and a stored answer it cannot read is for a
// person at once, never resent into the same replay.
func TestChargebeeReplayAfterALostAnswer(t *testing.T) {
	lost := shape{status: 502, body: `<html>bad gateway</html>`}
	replay := shape{status: 200, header: chargebeeReplayed, body: chargebeeSubscription}
	for _, tt := range []struct {
		name   string
		decode idem.Decoder
	}{{"chargebee's reading", decodeChargebeeSubscription}, {"DecodeJSON", idem.DecodeJSON}} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, lost, replay)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch),
				idem.WithKeyHeader("Chargebee-Idempotency-Key", idem.KeyBare), idem.WithDecoder(tt.decode))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/api/v2/customers/AzZlGJSpZ0e3b1/subscription_for_items",
				Body: []byte(`subscription_items[item_price_id][0]=basic-USD-monthly&subscription_items[quantity][0]=1`)})
			v.requireKeys(t, "Chargebee-Idempotency-Key", "k", 2)
			if tt.name == "DecodeJSON" {
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.True(t, strings.HasPrefix(res.Review, idem.ReviewFinalAnswer), res.Review)
				return
			}
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "AzZlGJSpZ0e3b1", res.ResourceID)
			require.True(t, res.Replayed)
		})
	}
}
