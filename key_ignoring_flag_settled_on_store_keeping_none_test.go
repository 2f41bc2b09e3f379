package idem_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// A Solidgate payment endpoint that does not de-duplicate by the key
// ("Idempotency support varies by endpoint. [...] A value of ignored means
// the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) charged k1,
// whose caller gave up before the answer came (k1 open, unflagged), then
// charged k2 and answered it 500 marked ignored: k2's drive flagged it
// ReviewKeyIgnored, its flag the only record of the endpoint on a Store
// that keeps none (no idem.KeyIgnoringStore, or a pgjournal whose schema
// Migrate has not brought to version 2: idem.ErrKeyIgnoringUnkept,
// modelled). The webhook's Confirm of k2 (or a person's Resolve, or idem
// resolve: KeepKeyIgnoringBeforeResolve) cleared that flag, and after a
// restart Resume resent k1 under the same key, which the endpoint charged
// again: charges [k1 k2 k1]. The endpoint's
// other open operations that may have executed are flagged before the
// flag is cleared: k1 is left open for a person, charged once.
func TestKeyIgnoringFlagSettledOnStoreKeepingNone(t *testing.T) {
	stores := []struct {
		name string
		wrap func(*journal.Store) idem.Store
	}{
		{"keeps none", func(js *journal.Store) idem.Store { return storeOnly{js} }},
		{"not migrated", func(js *journal.Store) idem.Store { return unmigratedStore{js} }},
	}
	settles := []struct {
		name   string
		settle func(context.Context, *idem.Client) error
	}{
		{"Confirm", func(ctx context.Context, c *idem.Client) error {
			_, err := c.Confirm(ctx, "", "k2", cardOrderUpdated(idem.StateSucceeded, "pay_2", "ev1"))
			return err
		}},
		{"Resolve", func(ctx context.Context, c *idem.Client) error {
			_, err := c.Resolve(ctx, "", "k2", idem.Resolution{State: idem.StateSucceeded, ResourceID: "pay_2", By: "ops", Reason: "seen in the dashboard"})
			return err
		}},
		{"idem resolve", func(ctx context.Context, c *idem.Client) error {
			// The tool on the journal, as pgjournal's idem resolve does.
			rec, err := c.Store().Get(ctx, idem.DefaultScope, "k2")
			if err != nil {
				return err
			}
			if err := idem.KeepKeyIgnoringBeforeResolve(ctx, c.Store(), rec); err != nil {
				return err
			}
			_, err = c.Store().Resolve(ctx, idem.DefaultScope, "k2", journal.Manual{State: idem.StateSucceeded, ResourceID: "pay_2", By: "ops", Reason: "seen in the dashboard", At: time.Now()})
			return err
		}},
	}
	for _, st := range stores {
		for _, se := range settles {
			t.Run(st.name+"/"+se.name, func(t *testing.T) {
				ctx, s, open := firstAnswerLost(t, st.wrap, func(_ int, w http.ResponseWriter) { ignoredInternalError(w) })
				charge := s.srv.URL + "/api/v1/charge"

				c, js := open()
				_, err := c.Submit(ctx, idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":100}`)})
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit(k1): its caller gave up")
				_, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":200}`)})
				require.Error(t, err, "Submit(k2): answered 500, marked ignored")
				op, err := c.Lookup(t.Context(), "", "k2")
				require.NoError(t, err)
				require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: k2's Review before it is settled")
				require.NoError(t, se.settle(t.Context(), c), se.name+"(k2)")
				c = resumedK1LeftForAPerson(t, c, js, open, s)
				op, err = c.Lookup(t.Context(), "", "k2")
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, op.State, "journal: k2 settled")
			})
		}
	}
}
