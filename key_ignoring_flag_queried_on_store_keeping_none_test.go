package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// The Solidgate payment endpoint that does not de-duplicate by the key
// ("Idempotency support varies by endpoint. [...] A value of ignored means
// the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) charged k1,
// whose caller gave up before the answer came (k1 open, unflagged), then
// charged k2 and answered it 500 marked ignored: k2 was flagged
// ReviewKeyIgnored, its flag the only record of the endpoint on a Store
// that keeps none (no idem.KeyIgnoringStore, or a pgjournal Migrate has
// not brought to version 2: idem.ErrKeyIgnoringUnkept, modelled). The
// caller's Do of k2 asked the order's status endpoint, which told of
// pay_2, settled: the query's settlement cleared the flag, and after a
// restart Resume resent k1 under the same key, which the endpoint charged
// again: charges [k1 k2 k1]. As before a Confirm or Resolve clears it
// (TestKeyIgnoringFlagSettledOnStoreKeepingNone), the endpoint's other
// open operations that may have executed are flagged first: k1 is left
// open for a person, charged once.
func TestKeyIgnoringFlagQueriedOnStoreKeepingNone(t *testing.T) {
	for _, tt := range storesKeepingNone {
		t.Run(tt.name, func(t *testing.T) {
			ctx, s, open := firstAnswerLost(t, tt.wrap, func(_ int, w http.ResponseWriter) { ignoredInternalError(w) })
			charge := s.srv.URL + "/api/v1/charge"

			c, js := open()
			submitK1Lost(ctx, t, c, charge)
			_, err := c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, ResultURL: s.srv.URL + "/api/v1/orders/o-1",
				Body: []byte(`{"amount":200,"order_id":"o-1"}`)})
			require.Error(t, err, "Submit(k2): answered 500, marked ignored")
			op, err := c.Lookup(t.Context(), "", "k2")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k2's Review before it is queried")

			s.answerFrom(1, orderStatus("pay_2", "settled"))
			res, err := c.Do(t.Context(), op)
			require.NoError(t, err, "Do(k2): the status endpoint tells of pay_2")
			require.Equal(t, idem.StateSucceeded, res.State, "Do(k2): State")
			require.Equal(t, []string{"k1", "k2"}, s.charged(), "charges before the restart")

			c = resumedK1LeftForAPerson(t, c, js, open, s)
			op, err = c.Lookup(t.Context(), "", "k2")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State, "journal: k2 settled")
		})
	}
}
