package idem_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// AWS takes the idempotency key of some REST APIs in a header named as
// a token: X-Amzn-Client-Token for Billing Conductor's
// CreateCustomLineItem (pattern [a-zA-Z0-9-]+, 1 to 64 characters,
// docs.aws.amazon.com/billingconductor/latest/APIReference/
// API_CreateCustomLineItem.html), X-Amz-Client-Token for Deadline
// Cloud's. Its name ends as credentials' names do, and the key it
// carried was blanked, as a credential the request was sent with, in all
// idem recorded of an answer that quotes it: AWS's ValidationException
// names the value it refuses ("1 validation error detected: Value '…'
// at '…' failed to satisfy constraint: Member must satisfy regular
// expression pattern: …"), and a person was left to guess that the
// value refused was the key, which the journal holds anyway. The key is
// no credential (CredentialHeader says so of a header named
// "idempotency"): only the request hook's credentials are blanked.
func TestAWSClientTokenKeyHeaderNotBlanked(t *testing.T) {
	const (
		key       = "order_2026_0001" // '_' is outside the token's pattern
		signature = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "ValidationException")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"message":"1 validation error detected: Value '` + r.Header.Get("X-Amzn-Client-Token") +
			`' at 'clientToken' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9-]+"}`))
	}))
	t.Cleanup(srv.Close)
	rc := newRecordingClient(t, srv, idem.WithKeyHeader("X-Amzn-Client-Token", idem.KeyBare),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-east-1/billingconductor/aws4_request, SignedHeaders=host;x-amz-date;x-amzn-client-token, Signature="+signature)
			return nil
		}))
	res, err := rc.client.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/create-custom-line-item", Body: []byte(`{"Name":"fee"}`)})
	require.ErrorIs(t, err, idem.ErrFailed, "a refusal of the key's form: nothing executed")
	require.EqualValues(t, 1, requests.Load(), "one request, refused")
	require.Contains(t, res.Reason, "Value '"+key+"' at 'clientToken'", "the value the server refused, for a person")
	require.Contains(t, string(res.Body), key)
	rec, gerr := rc.store.Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, gerr)
	require.NotNil(t, rec.Result)
	require.Contains(t, rec.Result.Reason, "Value '"+key+"'", "journaled reason")
	require.Contains(t, string(rec.Result.Body), key, "journaled body")
	rc.requireNothingHolds(t, key, signature)
}
