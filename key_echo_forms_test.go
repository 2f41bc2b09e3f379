package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A server that echoes the Idempotency-Key header may write it in the
// IETF draft's form, a quoted sf-string, though it was sent bare, and
// the other way round: either is this key. Read as another key's answer,
// every answer of such a server proved nothing and its operations were
// left unknown.
func TestKeyEchoForms(t *testing.T) {
	for _, tt := range []struct {
		name, echo string
		format     idem.KeyFormat
		settled    bool
	}{
		{"sent bare, echoed quoted", `"k"`, idem.KeyBare, true},
		{"sent quoted, echoed bare", `k`, idem.KeyQuoted, true},
		{"sent bare, another key echoed quoted", `"k2"`, idem.KeyBare, false},
		{"sent bare, echoed with stray quotes", `"k`, idem.KeyBare, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusCreated, header: http.Header{"Idempotency-Key": {tt.echo}}, body: `{"id":"ord_1"}`})
			res, err := v.submit(t, idem.WithKeyHeader(idem.DefaultKeyHeader, tt.format))
			if !tt.settled {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.Empty(t, res.ResourceID)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "ord_1", res.ResourceID)
			require.Equal(t, 1, v.posts())
		})
	}
}
