package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A UTF-8 byte order mark before a JSON answer (written by .NET's
// Encoding.UTF8 and by PHP sources saved with one) is allowed to be
// ignored by RFC 8259 §8.1; encoding/json refuses it. Read as
// undecodable, every answer of such a server left its operations unknown
// forever, each one resent until the budget ran out.
func TestJSONByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	for _, tt := range []struct {
		name  string
		shape shape
		state idem.State
		id    string
	}{
		{"resource", shape{status: http.StatusCreated, body: bom + `{"id":"ch_1","status":"succeeded"}`}, idem.StateSucceeded, "ch_1"},
		{"state", shape{status: http.StatusOK, body: bom + `{"state":"failed","reason":"declined"}`}, idem.StateFailed, ""},
		{"escaped", shape{status: http.StatusOK, body: bom + ` {"state":"succeeded","resourceId":"ord_\u00e9"}`}, idem.StateSucceeded, "ord_é"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shape)
			res, err := v.submit(t)
			require.NotErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, tt.state, res.State)
			require.Equal(t, tt.id, res.ResourceID)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}

	t.Run("a BOM alone is no answer", func(t *testing.T) {
		out, err := idem.DecodeJSON(&idem.Answer{Key: "k", StatusCode: http.StatusOK, Body: []byte(bom)})
		require.Error(t, err)
		require.Equal(t, idem.Outcome{}, out)
	})
}
