package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// AWS's JSON and Query protocols answer a throttled request with 400 and
// an error code (ThrottlingException, Throttling, …), not 429: the
// request was refused unexecuted, as a 429's, and resending it is what
// AWS's own SDKs do (retry.DefaultThrottleErrorCodes). Read as an
// ordinary 400, the payment was settled failed: a caller told so reports
// a decline that never happened.
func TestThrottled400(t *testing.T) {
	ok := shape{status: http.StatusOK, body: `{"state":"succeeded","resourceId":"pay_1"}`}
	for _, tt := range []struct {
		name   string
		shapes []shape
		state  idem.State
		posts  int
	}{
		{"aws json ThrottlingException", []shape{{status: 400, body: `{"__type":"ThrottlingException","message":"Rate exceeded"}`}, ok},
			idem.StateSucceeded, 2},
		{"aws json namespaced", []shape{{status: 400, header: http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"}},
			body: `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate exceeded"}`}, ok}, idem.StateSucceeded, 2},
		{"aws query Throttling", []shape{{status: 400, body: `<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>` +
			`<Message>Rate exceeded</Message></Error><RequestId>1</RequestId></ErrorResponse>`}, ok}, idem.StateSucceeded, 2},
		{"aws TooManyRequestsException", []shape{{status: 400, body: `{"__type":"TooManyRequestsException","message":"Too many requests"}`}, ok},
			idem.StateSucceeded, 2},
		{"a 400 about a throttle setting stays a failure", []shape{{status: 400, body: `{"message":"throttling_rate must be positive"}`}, ok},
			idem.StateFailed, 1},
		{"a 400 about a throttle setting, capitalized, stays a failure", []shape{{status: 400, body: `{"message":"Throttling rate must be positive"}`}, ok},
			idem.StateFailed, 1},
		{"a 400 validation error stays a failure", []shape{{status: 400, body: `{"__type":"ValidationException","message":"amount is required"}`}, ok},
			idem.StateFailed, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			res, err := v.submit(t)
			if tt.state == idem.StateFailed {
				require.ErrorIs(t, err, idem.ErrFailed)
			} else {
				require.NoError(t, err)
				require.Equal(t, "pay_1", res.ResourceID)
			}
			require.Equal(t, tt.state, res.State)
			v.requireKeys(t, "Idempotency-Key", "k", tt.posts)
		})
	}
}
