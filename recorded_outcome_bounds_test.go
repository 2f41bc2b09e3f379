package idem_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A server's answer names the resource and the reason in its own words,
// and a broken or hostile one (an id that is a stack trace, a reason that
// is the whole HTML error page quoted into JSON, up to the response cap)
// must not put them whole into the journal, where every later write of
// the record rewrites them, nor into every log line of the operation:
// they are cut to the bounds an operator's own resolution has.
func TestDecodedIDAndReasonAreBoundedAsRecorded(t *testing.T) {
	longID := "ord_" + strings.Repeat("é", 20_000) // cut mid-rune at 2048 bytes, made valid
	longReason := strings.Repeat("card declined; ", 10_000)
	for _, tc := range []struct {
		name   string
		body   string
		state  idem.State
		id     string
		reason string
	}{
		{"succeeded with a long id", `{"state":"succeeded","resourceId":"` + longID + `"}`, idem.StateSucceeded, longID, ""},
		{"failed with a long reason", `{"state":"failed","resourceId":"ord_1","reason":"` + longReason + `"}`, idem.StateFailed, "ord_1", longReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusCreated, body: tc.body})
			res, err := v.submit(t)
			if tc.state == idem.StateFailed {
				require.ErrorIs(t, err, idem.ErrFailed)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.state, res.State)
			require.Equal(t, 1, v.posts(), "settled by its one answer")
			require.LessOrEqual(t, len(res.ResourceID), 2048)
			require.True(t, strings.HasPrefix(tc.id, res.ResourceID), "the id's first bytes, whole runes: %q", res.ResourceID)
			if len(tc.id) > 2048 {
				require.Greater(t, len(res.ResourceID), 2040)
			}
			require.LessOrEqual(t, len(res.Reason), 1024)
			require.True(t, strings.HasPrefix(tc.reason, res.Reason))
			if tc.reason != "" {
				require.Greater(t, len(res.Reason), 1000)
			}
		})
	}
}
